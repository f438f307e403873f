import { KubeConfig } from "@kubernetes/client-node";
import * as x509 from "@peculiar/x509";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { credSpecCrd } from "../../cluster/credSpecCrd.js";
import { exitCodes, runWire } from "../../cluster/wire.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { kubeRequest } from "../support/kubeRequest.js";

/**
 * `npm run wire` against a real kube-apiserver: every object it renders applies cleanly with
 * server-side apply in both modes, a second run changes nothing, rotation keeps the webhooks'
 * caBundle and the relay's certificate together, and --uninstall leaves no webhook behind.
 */
interface Context {
  controlPlane: ControlPlane;
  admin: KubeConfig;
}

const identity = "11111111-2222-3333-4444-555555555555";
const url = ["--function-url", "https://func-gmsa-abc.azurewebsites.net", "--identity", identity];
const urlMode = [...url, "--mode", "url"];
const relayMode = [...url, "--mode", "relay", "--function-key", "AbCdEfGhIjKlMnOp0123=="];

const Wiring = suite<Context>("wiring a real API server", {} as Context);

Wiring.before(async (context) => {
  try {
    context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
    context.admin = new KubeConfig();
    context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
  } catch (error) {
    console.error("wiring set-up failed:", error);
    throw error;
  }
});

Wiring.after(async (context) => {
  await context.controlPlane?.stop();
});

async function wire(context: Context, argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runWire(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), kubeConfig: () => context.admin });
  return { code, stdout, stderr };
}

async function get(context: Context, path: string): Promise<any> {
  const reply = await kubeRequest(context.admin, "GET", path);
  return reply.status === 200 ? reply.body : undefined;
}

function lines(text: string): string[] {
  return text.trim().split("\n");
}

Wiring("a CRD that someone else installed (the AKS gMSA add-on) is detected and never touched", async (context) => {
  const created = await kubeRequest(context.admin, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?fieldManager=aks-gmsa-addon", credSpecCrd());
  assert.is(created.status, 201, JSON.stringify(created.body));
  const run = await wire(context, [...urlMode, "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.match(run.stderr, /GMSACredentialSpec CRD: installed by someone else/);
  assert.not.match(run.stdout, /CustomResourceDefinition/);
  const crd = await get(context, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gmsacredentialspecs.windows.k8s.io");
  assert.equal(crd.metadata.managedFields.map((f: any) => f.manager).filter((m: string) => m === "gmsa-admission"), []);
});

Wiring("url mode: every object applies, and the webhooks call the function's URL", async (context) => {
  const run = await wire(context, [...urlMode, "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.equal(lines(run.stdout), [
    "ClusterRole/gmsa-admission-webhook: applied",
    "ClusterRoleBinding/gmsa-admission-webhook: applied",
    "MutatingWebhookConfiguration/gmsa-admission: applied",
    "ValidatingWebhookConfiguration/gmsa-admission: applied",
  ]);
  const mutating = await get(context, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission");
  assert.equal(mutating.webhooks[0].clientConfig, { url: "https://func-gmsa-abc.azurewebsites.net/mutate" });
  const binding = await get(context, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gmsa-admission-webhook");
  assert.equal(binding.subjects, [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: identity }]);
});

Wiring("url mode: wiring again changes nothing", async (context) => {
  const run = await wire(context, [...urlMode, "--apply", "--dry-run"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.ok(lines(run.stdout).every((line) => line.endsWith(": unchanged")), run.stdout);
});

Wiring("relay mode: every object applies, and the webhooks address the relay's service with its CA", async (context) => {
  const plan = await wire(context, [...relayMode, "--apply", "--dry-run"]);
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  assert.match(plan.stdout, /Namespace\/gmsa-admission: create/);
  assert.match(plan.stdout, /Deployment\/gmsa-admission\/gmsa-admission-relay: create/);
  assert.match(plan.stdout, /MutatingWebhookConfiguration\/gmsa-admission: update webhooks\[0\]\.clientConfig\.caBundle, webhooks\[0\]\.clientConfig\.service, webhooks\[0\]\.clientConfig\.url$/m);
  assert.is(await get(context, "/api/v1/namespaces/gmsa-admission"), undefined, "a dry run creates nothing");

  const run = await wire(context, [...relayMode, "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.match(run.stderr, /relay certificate: issued/);
  assert.is(lines(run.stdout).length, 14);
  const mutating = await get(context, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission");
  const clientConfig = mutating.webhooks[0].clientConfig;
  assert.equal(clientConfig.service, { namespace: "gmsa-admission", name: "gmsa-admission-relay", path: "/mutate", port: 443 });
  assert.is(clientConfig.url, undefined, "the URL is gone: one owner, one clientConfig");
  const secret = await get(context, "/api/v1/namespaces/gmsa-admission/secrets/gmsa-admission-relay-tls");
  assert.is(clientConfig.caBundle, secret.data["ca.crt"]);
  const deployment = await get(context, "/apis/apps/v1/namespaces/gmsa-admission/deployments/gmsa-admission-relay");
  assert.is(deployment.spec.template.spec.automountServiceAccountToken, false);
});

Wiring("relay mode: wiring again keeps the certificate and changes nothing", async (context) => {
  const run = await wire(context, [...relayMode, "--apply", "--dry-run"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.match(run.stderr, /still good; kept/);
  assert.ok(lines(run.stdout).every((line) => line.endsWith(": unchanged")), run.stdout);
  const again = await wire(context, [...relayMode, "--apply"]);
  assert.is(again.code, exitCodes.ok, again.stderr);
});

Wiring("--rotate-certificate: a new certificate, the caBundle that trusts it, and pods that restart to read it", async (context) => {
  const before = await get(context, "/apis/apps/v1/namespaces/gmsa-admission/deployments/gmsa-admission-relay");
  const plan = await wire(context, [...relayMode, "--apply", "--dry-run", "--rotate-certificate"]);
  assert.match(plan.stdout, /Secret\/gmsa-admission\/gmsa-admission-relay-tls: update data\["ca\.crt"\], data\["tls\.crt"\], data\["tls\.key"\]/);
  assert.match(plan.stdout, /Deployment\/gmsa-admission\/gmsa-admission-relay: update .*relay-config-checksum/);
  assert.match(plan.stdout, /ValidatingWebhookConfiguration\/gmsa-admission: update webhooks\[0\]\.clientConfig\.caBundle/);
  assert.not.match(plan.stdout, /-----BEGIN|AbCdEfGh/, "no secret value is printed");

  const run = await wire(context, [...relayMode, "--apply", "--rotate-certificate"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  const secret = await get(context, "/api/v1/namespaces/gmsa-admission/secrets/gmsa-admission-relay-tls");
  const validating = await get(context, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gmsa-admission");
  assert.is(validating.webhooks[0].clientConfig.caBundle, secret.data["ca.crt"]);
  const ca = new x509.X509Certificate(Buffer.from(secret.data["ca.crt"], "base64").toString());
  const serving = new x509.X509Certificate(Buffer.from(secret.data["tls.crt"], "base64").toString());
  assert.ok(await serving.verify({ publicKey: ca.publicKey }), "the caBundle trusts the serving certificate");
  const after = await get(context, "/apis/apps/v1/namespaces/gmsa-admission/deployments/gmsa-admission-relay");
  const checksum = (d: any) => d.spec.template.metadata.annotations["gmsa-admission.windows.k8s.io/relay-config-checksum"];
  assert.is.not(checksum(after), checksum(before));
});

Wiring("warns about another mutating webhook on pods' gMSA settings", async (context) => {
  const other = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: "gmsa-webhook" },
    webhooks: [
      {
        name: "admission-webhook.windows-gmsa.sigs.k8s.io",
        clientConfig: { service: { namespace: "gmsa-webhook", name: "gmsa-webhook", path: "/mutate" } },
        rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
        failurePolicy: "Ignore",
        sideEffects: "None",
        admissionReviewVersions: ["v1"],
        objectSelector: { matchLabels: { "never-matches": "true" } },
      },
    ],
  };
  const created = await kubeRequest(context.admin, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", other);
  assert.is(created.status, 201, JSON.stringify(created.body));
  const run = await wire(context, [...relayMode, "--apply", "--dry-run"]);
  assert.is(run.code, exitCodes.ok);
  assert.match(run.stderr, /warning: the mutating webhook gmsa-webhook\/admission-webhook\.windows-gmsa\.sigs\.k8s\.io also handles pods' gMSA settings/);
  await kubeRequest(context.admin, "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-webhook");
});

Wiring("--uninstall removes the webhook configurations first, then the relay and the RBAC, never the CRD", async (context) => {
  const plan = await wire(context, ["--uninstall", "--apply", "--dry-run"]);
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  assert.ok(lines(plan.stdout).every((line) => line.endsWith(": would delete")), plan.stdout);
  assert.ok(await get(context, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission"), "a dry run deletes nothing");

  const run = await wire(context, ["--uninstall", "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  const order = lines(run.stdout).map((line) => line.split(":")[0]);
  assert.equal(order.slice(0, 2), ["MutatingWebhookConfiguration/gmsa-admission", "ValidatingWebhookConfiguration/gmsa-admission"]);
  assert.equal(order.slice(-2), ["ClusterRoleBinding/gmsa-admission-webhook", "ClusterRole/gmsa-admission-webhook"]);
  assert.ok(lines(run.stdout).every((line) => line.endsWith(": deleted")), run.stdout);
  for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
    const left = await get(context, `/apis/admissionregistration.k8s.io/v1/${kind}`);
    assert.equal(left.items.map((i: any) => i.metadata.name), [], `no ${kind} left`);
  }
  assert.ok(await get(context, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gmsacredentialspecs.windows.k8s.io"), "the CRD stays");
  assert.is(await get(context, "/apis/rbac.authorization.k8s.io/v1/clusterroles/gmsa-admission-webhook"), undefined);

  const again = await wire(context, ["--uninstall", "--apply"]);
  assert.is(again.code, exitCodes.ok, again.stderr);
  assert.match(again.stdout, /MutatingWebhookConfiguration\/gmsa-admission: absent/);
});

Wiring.run();
