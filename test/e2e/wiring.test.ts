import { KubeConfig, Watch } from "@kubernetes/client-node";
import { X509Certificate } from "node:crypto";
import * as x509 from "@peculiar/x509";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import { certificatesOf } from "../../cluster/relayCaRotation.js";
import { issueRelayCertificate } from "../../cluster/relayCertificate.js";
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

async function wire(context: Context, argv: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runWire(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), kubeConfig: () => context.admin, env });
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
  assert.equal(
    crd.metadata.managedFields.map((f: any) => f.manager).filter((m: string) => m === "gmsa-admission"),
    [],
  );
});

Wiring("url mode: every object applies, and the webhooks call the function's URL", async (context) => {
  const run = await wire(context, [...urlMode, "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.not.match(run.stderr, /network policy/, "url wiring has no relay to guard");
  assert.equal(lines(run.stdout), [
    "ClusterRole/gmsa-admission-webhook: applied",
    "ClusterRoleBinding/gmsa-admission-webhook: applied",
    "Namespace/gmsa-admission-canary: applied",
    "ServiceAccount/gmsa-admission-canary/canary: applied",
    "Role/gmsa-admission-canary/gmsa-admission-canary: applied",
    "RoleBinding/gmsa-admission-canary/gmsa-admission-canary: applied",
    "ValidatingAdmissionPolicy/gmsa-admission-canary-dry-run-only: applied",
    "ValidatingAdmissionPolicyBinding/gmsa-admission-canary-dry-run-only: applied",
    "ValidatingAdmissionPolicy/gmsa-admission-pods: applied",
    "ValidatingAdmissionPolicyBinding/gmsa-admission-pods: applied",
    "ValidatingAdmissionPolicy/gmsa-admission-bindings: applied",
    "ValidatingAdmissionPolicyBinding/gmsa-admission-bindings: applied",
    "ValidatingAdmissionPolicy/gmsa-admission-credentialspecs: applied",
    "ValidatingAdmissionPolicyBinding/gmsa-admission-credentialspecs: applied",
    "PriorityLevelConfiguration/gmsa-admission-webhook: applied",
    "FlowSchema/gmsa-admission-webhook: applied",
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
  assert.ok(
    lines(run.stdout).every((line) => line.endsWith(": unchanged")),
    run.stdout,
  );
});

Wiring("relay mode: every object applies, and the webhooks address the relay's service with its CA", async (context) => {
  const plan = await wire(context, [...relayMode, "--apply", "--dry-run"]);
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  assert.match(plan.stdout, /Namespace\/gmsa-admission: create/);
  assert.match(plan.stdout, /Deployment\/gmsa-admission\/gmsa-admission-relay: create/);
  assert.match(
    plan.stdout,
    /MutatingWebhookConfiguration\/gmsa-admission: update webhooks\[0\]\.clientConfig\.caBundle, webhooks\[0\]\.clientConfig\.service, webhooks\[0\]\.clientConfig\.url$/m,
  );
  assert.is(await get(context, "/api/v1/namespaces/gmsa-admission"), undefined, "a dry run creates nothing");

  const run = await wire(context, [...relayMode, "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.match(run.stderr, /relay certificate: issued/);
  // The test cluster runs no network policy engine: the relay's NetworkPolicy would not hold.
  assert.match(run.stderr, /warning: no network policy engine found .*any pod in the cluster can call the relay/);
  assert.is(lines(run.stdout).length, 28);
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
  assert.ok(
    lines(run.stdout).every((line) => line.endsWith(": unchanged")),
    run.stdout,
  );
  const again = await wire(context, [...relayMode, "--apply"]);
  assert.is(again.code, exitCodes.ok, again.stderr);
});

const relayNs = "gmsa-admission";
const deploymentPath = `/apis/apps/v1/namespaces/${relayNs}/deployments/gmsa-admission-relay`;
const tlsSecretPath = `/api/v1/namespaces/${relayNs}/secrets/gmsa-admission-relay-tls`;
const webhookPaths = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"].map((kind) => `/apis/admissionregistration.k8s.io/v1/${kind}/gmsa-admission`);

/** There is no controller manager: the test plays the Deployment controller by writing the status. */
async function setRolloutStatus(context: Context, status: { replicas: number; updatedReplicas: number; availableReplicas: number }, generation?: number): Promise<void> {
  const deployment = await get(context, deploymentPath);
  const observedGeneration = generation ?? deployment.metadata.generation;
  const reply = await kubeRequest(
    context.admin,
    "PATCH",
    `${deploymentPath}/status`,
    { status: { observedGeneration, readyReplicas: status.availableReplicas, ...status } },
    "application/merge-patch+json",
  );
  assert.is(reply.status, 200, JSON.stringify(reply.body));
}

const rolledOut = { replicas: 2, updatedReplicas: 2, availableReplicas: 2 };
/** One new pod up, both old ones still serving. */
const halfway = { replicas: 3, updatedReplicas: 1, availableReplicas: 2 };

async function caOf(context: Context): Promise<string> {
  return Buffer.from((await get(context, tlsSecretPath)).data["ca.crt"], "base64").toString();
}

async function trustedBundles(context: Context): Promise<string[]> {
  return Promise.all(webhookPaths.map(async (path) => Buffer.from((await get(context, path)).webhooks[0].clientConfig.caBundle, "base64").toString()));
}

function pemId(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

function idsOf(bundle: string): Set<string> {
  return new Set(certificatesOf(bundle).map(pemId));
}

interface Change {
  readonly revision: number;
  readonly kind: string;
  readonly object: any;
}

/**
 * Every change to the webhook configurations, the relay's TLS Secret and its Deployment, in the
 * order the API server made them (one etcd, so resourceVersions are one sequence), starting from
 * their current state.
 */
async function recordChanges(context: Context): Promise<{ changes: Change[]; stop(): void }> {
  const changes: Change[] = [];
  const watches = [
    { kind: "MutatingWebhookConfiguration", path: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", name: "gmsa-admission" },
    { kind: "ValidatingWebhookConfiguration", path: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", name: "gmsa-admission" },
    { kind: "Secret", path: `/api/v1/namespaces/${relayNs}/secrets`, name: "gmsa-admission-relay-tls" },
    { kind: "Deployment", path: `/apis/apps/v1/namespaces/${relayNs}/deployments`, name: "gmsa-admission-relay" },
  ];
  const seen = new Set<string>();
  const controllers = await Promise.all(
    watches.map(({ kind, path, name }) =>
      new Watch(context.admin).watch(
        path,
        { fieldSelector: `metadata.name=${name}` },
        (phase, object) => {
          if (phase === "ADDED" || phase === "MODIFIED") {
            seen.add(kind);
            changes.push({ revision: Number(object.metadata.resourceVersion), kind, object });
          }
        },
        () => {},
      ),
    ),
  );
  for (let i = 0; i < 100 && seen.size < watches.length; i++) await new Promise((r) => setTimeout(r, 50));
  assert.is(seen.size, watches.length, "every watch delivered the current state");
  return { changes, stop: () => controllers.forEach((c) => c.abort()) };
}

function rolloutDone(deployment: any): boolean {
  const s = deployment.status ?? {};
  const wanted = deployment.spec.replicas;
  return (s.observedGeneration ?? 0) >= deployment.metadata.generation && s.updatedReplicas === wanted && s.replicas === wanted && s.availableReplicas === wanted;
}

/**
 * Replays the recorded changes and checks, after each one, that both webhook configurations
 * trust the CA of every relay pod generation that may be serving: the old CA until the rollout of
 * the new template is seen done, and the CA in the Secret (new pods, and old pods that restart,
 * read it) from the moment it is there.
 */
function assertAlwaysTrusted(changes: readonly Change[], oldCa: string): void {
  const ordered = [...changes].sort((a, b) => a.revision - b.revision);
  const latest = new Map<string, any>();
  let firstTemplate: string | undefined;
  let newTemplateSeen = false;
  let oldPodsGone = false;
  const oldId = pemId(oldCa);
  let judgedDuringRollover = 0;
  for (const change of ordered) {
    latest.set(change.kind, change.object);
    // The initial states come in at their own, older, revisions: judge once all four are known.
    if (latest.size < 4) continue;
    const deployment = latest.get("Deployment");
    if (deployment) {
      const template = JSON.stringify(deployment.spec.template);
      firstTemplate ??= template;
      if (template !== firstTemplate) newTemplateSeen = true;
      if (newTemplateSeen && rolloutDone(deployment)) oldPodsGone = true;
    }
    const secret = latest.get("Secret");
    const required = new Set<string>();
    if (!oldPodsGone) required.add(oldId);
    if (secret) required.add(pemId(Buffer.from(secret.data["ca.crt"], "base64").toString()));
    if (required.size === 2) judgedDuringRollover++;
    for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
      const trusted = idsOf(Buffer.from(latest.get(kind).webhooks[0].clientConfig.caBundle, "base64").toString());
      for (const id of required) {
        assert.ok(
          trusted.has(id),
          `at revision ${change.revision} (${change.kind} changed) ${kind} does not trust the ${id === oldId ? "old" : "new"} CA, which a relay pod may be serving under`,
        );
      }
    }
  }
  assert.ok(judgedDuringRollover > 0, "the record holds the time when old pods serve and the new certificate is out");
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.unreachable(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

Wiring("--rotate-certificate: the webhooks trust both CAs before the new certificate is served, and the old one only until the rollout is done", async (context) => {
  await setRolloutStatus(context, rolledOut);
  const before = await get(context, deploymentPath);
  const oldCa = await caOf(context);
  const plan = await wire(context, [...relayMode, "--apply", "--dry-run", "--rotate-certificate"]);
  assert.match(plan.stdout, /Secret\/gmsa-admission\/gmsa-admission-relay-tls: update data\["ca\.crt"\], data\["tls\.crt"\], data\["tls\.key"\]/);
  assert.match(plan.stdout, /Deployment\/gmsa-admission\/gmsa-admission-relay: update .*relay-config-checksum/);
  assert.match(plan.stdout, /ValidatingWebhookConfiguration\/gmsa-admission: update webhooks\[0\]\.clientConfig\.caBundle/);
  assert.match(plan.stderr, /would roll over in two steps/);
  assert.not.match(plan.stdout, /-----BEGIN|AbCdEfGh/, "no secret value is printed");

  const recorder = await recordChanges(context);
  try {
    const running = wire(context, [...relayMode, "--apply", "--rotate-certificate", "--rollout-timeout-seconds", "60"]);
    const started = await until("the new pod template", async () => {
      const deployment = await get(context, deploymentPath);
      return deployment.metadata.generation > before.metadata.generation ? deployment : undefined;
    });
    const newCa = await caOf(context);
    assert.is.not(pemId(newCa), pemId(oldCa));
    await setRolloutStatus(context, halfway, started.metadata.generation);
    await new Promise((r) => setTimeout(r, 1500));
    for (const bundle of await trustedBundles(context)) {
      assert.ok(idsOf(bundle).has(pemId(oldCa)) && idsOf(bundle).has(pemId(newCa)), "halfway through, both generations are trusted");
    }
    await setRolloutStatus(context, rolledOut, started.metadata.generation);
    const run = await running;
    assert.is(run.code, exitCodes.ok, run.stderr);
    assert.match(run.stderr, /trust the old and the new relay CA while the relay's pods roll over/);
    assert.match(run.stderr, /the old CA is no longer trusted/);
    await new Promise((r) => setTimeout(r, 300));
    assertAlwaysTrusted(recorder.changes, oldCa);
    for (const bundle of await trustedBundles(context)) assert.equal([...idsOf(bundle)], [pemId(newCa)], "the old CA is gone once the rollout is done");
    const secret = await get(context, tlsSecretPath);
    const serving = new x509.X509Certificate(Buffer.from(secret.data["tls.crt"], "base64").toString());
    assert.ok(await serving.verify({ publicKey: new x509.X509Certificate(newCa).publicKey }), "the caBundle trusts the serving certificate");
  } finally {
    recorder.stop();
  }
});

Wiring("a rollout that does not finish in time leaves both CAs trusted, says so, and the next wiring finishes the rotation", async (context) => {
  await setRolloutStatus(context, rolledOut);
  const oldCa = await caOf(context);
  const recorder = await recordChanges(context);
  try {
    const run = await wire(context, [...relayMode, "--apply", "--rotate-certificate", "--rollout-timeout-seconds", "2"]);
    assert.is(run.code, exitCodes.failed);
    assert.match(run.stderr, /the rollout did not finish within 2 s \(0 of 2 replicas updated\)|the rollout did not finish within 2 s \(the controller to see generation \d+\)/);
    assert.match(run.stderr, /keep trusting the old and the new relay CA/);
    assert.match(run.stderr, /wire again: that drops the old CA/);
    const newCa = await caOf(context);
    for (const bundle of await trustedBundles(context)) assert.ok(idsOf(bundle).has(pemId(oldCa)) && idsOf(bundle).has(pemId(newCa)));

    // A wiring meanwhile, before the rollout is done, keeps both and waits again.
    const early = await wire(context, [...relayMode, "--apply", "--rollout-timeout-seconds", "1"]);
    assert.is(early.code, exitCodes.failed, early.stderr);
    assert.match(early.stderr, /still good; kept/);
    for (const bundle of await trustedBundles(context)) assert.is(idsOf(bundle).size, 2);

    await setRolloutStatus(context, rolledOut);
    const next = await wire(context, [...relayMode, "--apply"]);
    assert.is(next.code, exitCodes.ok, next.stderr);
    assert.match(next.stderr, /the old CA is no longer trusted/);
    await new Promise((r) => setTimeout(r, 300));
    assertAlwaysTrusted(recorder.changes, oldCa);
    for (const bundle of await trustedBundles(context)) assert.equal([...idsOf(bundle)], [pemId(newCa)]);
  } finally {
    recorder.stop();
  }
});

Wiring("automatic renewal of a certificate near its end rolls over in the same two steps", async (context) => {
  // As if an earlier wiring had issued a certificate that now has 30 days left.
  const expiring = await issueRelayCertificate(relayNs, 30);
  const data = { "ca.crt": expiring.caPem, "tls.crt": expiring.certPem, "tls.key": expiring.keyPem };
  const patched = await kubeRequest(
    context.admin,
    "PATCH",
    tlsSecretPath,
    { data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString("base64")])) },
    "application/merge-patch+json",
  );
  assert.is(patched.status, 200, JSON.stringify(patched.body));
  for (const path of webhookPaths) {
    const configuration = await get(context, path);
    configuration.webhooks[0].clientConfig.caBundle = Buffer.from(expiring.caPem).toString("base64");
    const put = await kubeRequest(context.admin, "PUT", path, configuration);
    assert.is(put.status, 200, JSON.stringify(put.body));
  }
  await setRolloutStatus(context, rolledOut);
  const before = await get(context, deploymentPath);

  const recorder = await recordChanges(context);
  try {
    const running = wire(context, [...relayMode, "--apply", "--rollout-timeout-seconds", "60"]);
    const started = await until("the new pod template", async () => {
      const deployment = await get(context, deploymentPath);
      return deployment.metadata.generation > before.metadata.generation ? deployment : undefined;
    });
    await setRolloutStatus(context, halfway, started.metadata.generation);
    await new Promise((r) => setTimeout(r, 1500));
    await setRolloutStatus(context, rolledOut, started.metadata.generation);
    const run = await running;
    assert.is(run.code, exitCodes.ok, run.stderr);
    assert.match(run.stderr, /relay certificate: issued/);
    await new Promise((r) => setTimeout(r, 300));
    assertAlwaysTrusted(recorder.changes, expiring.caPem);
    const newCa = await caOf(context);
    for (const bundle of await trustedBundles(context)) assert.equal([...idsOf(bundle)], [pemId(newCa)]);
  } finally {
    recorder.stop();
  }
});

Wiring("names another mutating webhook on pods' gMSA settings, and the exact command that removes it", async (context) => {
  const other = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    // As the windows-gmsa Helm chart installs it (helm stamps its release on what it installs).
    metadata: { name: "gmsa-webhook", annotations: { "meta.helm.sh/release-name": "gmsa-webhook", "meta.helm.sh/release-namespace": "gmsa-webhook" } },
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
  assert.match(
    run.stderr,
    /notice: the windows-gmsa Helm release gmsa-webhook\/gmsa-webhook \(gmsa-webhook\/admission-webhook\.windows-gmsa\.sigs\.k8s\.io\) also handles pods' gMSA settings/,
  );
  assert.match(run.stderr, /remove the other: helm uninstall gmsa-webhook --namespace gmsa-webhook /);
  await kubeRequest(context.admin, "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-webhook");
  // The AKS add-on's webhook runs in kube-system: removed with az aks update.
  const addon = { ...other, metadata: { name: "aks-gmsa-webhook" } };
  addon.webhooks = [{ ...other.webhooks[0]!, clientConfig: { service: { namespace: "kube-system", name: "gmsa-webhook", path: "/mutate" } } }];
  assert.is((await kubeRequest(context.admin, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", addon)).status, 201);
  const withAddon = await wire(context, [...relayMode, "--apply", "--dry-run"]);
  assert.match(
    withAddon.stderr,
    /notice: the AKS gMSA add-on \(aks-gmsa-webhook\/.*remove the other: az aks update --resource-group <resource group> --name <cluster> --disable-windows-gmsa/,
  );
  await kubeRequest(context.admin, "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/aks-gmsa-webhook");
});

Wiring("--uninstall removes the webhook configurations first, then the relay and the RBAC, never the CRD", async (context) => {
  const plan = await wire(context, ["--uninstall", "--apply", "--dry-run"]);
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  // The canary's namespace was applied, not created as the wiring's own: it is left.
  const canaryNamespace = "Namespace/gmsa-admission-canary: kept";
  assert.ok(lines(plan.stdout).includes(canaryNamespace), plan.stdout);
  // The audit's role is opt-in (--audit): not installed here, so absent, and removed whenever it is.
  const audit = (line: string) => line.includes("/gmsa-admission-audit:");
  assert.equal(lines(plan.stdout).filter(audit), ["ClusterRoleBinding/gmsa-admission-audit: absent", "ClusterRole/gmsa-admission-audit: absent"]);
  assert.ok(
    lines(plan.stdout)
      .filter((line) => line !== canaryNamespace && !audit(line))
      .every((line) => line.endsWith(": would delete")),
    plan.stdout,
  );
  assert.ok(await get(context, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission"), "a dry run deletes nothing");

  const run = await wire(context, ["--uninstall", "--apply"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  const order = lines(run.stdout).map((line) => line.split(":")[0]);
  assert.equal(order.slice(0, 2), ["MutatingWebhookConfiguration/gmsa-admission", "ValidatingWebhookConfiguration/gmsa-admission"]);
  assert.equal(order.slice(-2), ["ClusterRoleBinding/gmsa-admission-webhook", "ClusterRole/gmsa-admission-webhook"]);
  assert.ok(
    lines(run.stdout)
      .filter((line) => line !== canaryNamespace && !audit(line))
      .every((line) => line.endsWith(": deleted")),
    run.stdout,
  );
  assert.is(await get(context, "/apis/rbac.authorization.k8s.io/v1/namespaces/gmsa-admission-canary/rolebindings/gmsa-admission-canary"), undefined, "the canary's grant goes");
  for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
    const left = await get(context, `/apis/admissionregistration.k8s.io/v1/${kind}`);
    assert.equal(
      left.items.map((i: any) => i.metadata.name),
      [],
      `no ${kind} left`,
    );
  }
  assert.ok(await get(context, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gmsacredentialspecs.windows.k8s.io"), "the CRD stays");
  assert.is(await get(context, "/apis/rbac.authorization.k8s.io/v1/clusterroles/gmsa-admission-webhook"), undefined);
  for (const kind of ["validatingadmissionpolicies", "validatingadmissionpolicybindings"]) {
    const left = await get(context, `/apis/admissionregistration.k8s.io/v1/${kind}`);
    assert.equal(
      left.items.map((i: any) => i.metadata.name).filter((name: string) => name.startsWith("gmsa-admission")),
      [],
      `no ${kind} of the wiring left, the safety net's included`,
    );
  }

  const again = await wire(context, ["--uninstall", "--apply"]);
  assert.is(again.code, exitCodes.ok, again.stderr);
  assert.match(again.stdout, /MutatingWebhookConfiguration\/gmsa-admission: absent/);
});

Wiring("wiring into a namespace it did not create is refused and changes nothing; uninstall never deletes it", async (context) => {
  const team = await kubeRequest(context.admin, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "team" } });
  assert.is(team.status, 201, JSON.stringify(team.body));
  const workload = await kubeRequest(context.admin, "POST", "/api/v1/namespaces/team/configmaps", {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "app-config" },
    data: { a: "b" },
  });
  assert.is(workload.status, 201, JSON.stringify(workload.body));

  for (const argv of [
    [...relayMode, "--namespace", "team", "--apply"],
    [...relayMode, "--namespace", "team", "--apply", "--dry-run"],
  ]) {
    const run = await wire(context, argv);
    assert.is(run.code, exitCodes.failed, run.stdout);
    assert.match(run.stderr, /namespace team exists and was not created by the wiring: the relay needs a namespace of its own/);
    assert.is(run.stdout, "");
  }
  const after = await get(context, "/api/v1/namespaces/team");
  assert.is(after.metadata.labels["windows.k8s.io/disabled"], undefined, "the namespace is not opted out of the webhooks");
  assert.equal((await get(context, "/api/v1/namespaces/team/secrets")).items, [], "nothing of the relay was put there");
  assert.equal((await get(context, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")).items, []);

  // The labels an earlier wiring's apply put on it prove nothing about who made it.
  const labelled = await kubeRequest(
    context.admin,
    "PATCH",
    "/api/v1/namespaces/team",
    { metadata: { labels: { "app.kubernetes.io/name": "gmsa-admission-relay", "windows.k8s.io/disabled": "true" } } },
    "application/merge-patch+json",
  );
  assert.is(labelled.status, 200, JSON.stringify(labelled.body));
  const removal = await wire(context, ["--uninstall", "--apply", "--namespace", "team"]);
  assert.is(removal.code, exitCodes.ok, removal.stderr);
  assert.match(removal.stdout, /^Namespace\/team: kept$/m);
  const kept = await get(context, "/api/v1/namespaces/team");
  assert.ok(kept && kept.metadata.deletionTimestamp === undefined, "the namespace is still there, not terminating");
  assert.ok(await get(context, "/api/v1/namespaces/team/configmaps/app-config"), "and what it held");
});

Wiring(
  "a namespace the wiring creates is marked at creation (never by an apply) and uninstall deletes it; an older relay namespace is adopted only on request",
  async (context) => {
    const run = await wire(context, [...relayMode, "--namespace", "relay-two", "--apply"]);
    assert.is(run.code, exitCodes.ok, run.stderr);
    const created = await get(context, "/api/v1/namespaces/relay-two");
    assert.is(created.metadata.annotations["gmsa-admission.windows.k8s.io/created-by"], "wire");
    const applied = created.metadata.managedFields.filter((f: any) => f.manager === "gmsa-admission" && f.operation === "Apply");
    assert.ok(applied.length === 1 && !JSON.stringify(applied[0].fieldsV1).includes("created-by"), "the apply does not own the mark");
    const again = await wire(context, [...relayMode, "--namespace", "relay-two", "--apply"]);
    assert.is(again.code, exitCodes.ok, again.stderr);
    const removal = await wire(context, ["--uninstall", "--apply", "--namespace", "relay-two"]);
    assert.match(removal.stdout, /^Namespace\/relay-two: deleted$/m);

    const legacy = await kubeRequest(context.admin, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "legacy-relay" } });
    assert.is(legacy.status, 201, JSON.stringify(legacy.body));
    const adopted = await wire(context, [...relayMode, "--namespace", "legacy-relay", "--apply", "--adopt-namespace"]);
    assert.is(adopted.code, exitCodes.ok, adopted.stderr);
    assert.match(adopted.stderr, /namespace legacy-relay: recorded as the wiring's own/);
    const gone = await wire(context, ["--uninstall", "--apply", "--namespace", "legacy-relay"]);
    assert.match(gone.stdout, /^Namespace\/legacy-relay: deleted$/m);
  },
);

// A fleet member's wiring (--cluster): its paths, its secret, and replacing that secret.
const memberSecrets = ["first-secret-of-alpha_0123456789abcdef", "second-secret-of-alpha_0123456789abcde", "third-secret-of-alpha_0123456789abcdefg"] as const;

function showsNoSecret(run: { stdout: string; stderr: string }): void {
  for (const secret of memberSecrets) assert.not.ok(`${run.stdout}${run.stderr}`.includes(secret), "no member secret is printed");
}

async function webhookUrls(context: Context): Promise<string[]> {
  return (await Promise.all(webhookPaths.map(async (path) => (await get(context, path)).webhooks.map((w: any) => w.clientConfig.url)))).flat();
}

Wiring("--cluster in url mode: the webhooks call the member's paths with its secret; a new secret replaces it and is never printed", async (context) => {
  const member = [...urlMode, "--cluster", "alpha", "--apply"];
  const first = await wire(context, member, { GMSA_CLUSTER_SECRET: memberSecrets[0] });
  assert.is(first.code, exitCodes.ok, first.stderr);
  showsNoSecret(first);
  const base = "https://func-gmsa-abc.azurewebsites.net/clusters/alpha";
  assert.equal(
    await webhookUrls(context),
    ["/mutate", "/validate", "/validate-credspec"].map((path) => `${base}/${memberSecrets[0]}${path}`),
  );
  assert.not.match(first.stderr, /cluster secret:/, "a first wiring replaces nothing");

  const plan = await wire(context, [...member, "--dry-run"], { GMSA_CLUSTER_SECRET: memberSecrets[1] });
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  showsNoSecret(plan);
  assert.match(plan.stdout, /^MutatingWebhookConfiguration\/gmsa-admission: update webhooks\[0\]\.clientConfig\.url$/m);
  assert.match(plan.stderr, /cluster secret: would be replaced; GMSA_CLUSTER_SECRET_ALPHA must accept the new and the old one/);
  assert.ok(
    (await webhookUrls(context)).every((url) => url.includes(memberSecrets[0])),
    "a dry run changes nothing",
  );

  const rotated = await wire(context, member, { GMSA_CLUSTER_SECRET: memberSecrets[1] });
  assert.is(rotated.code, exitCodes.ok, rotated.stderr);
  showsNoSecret(rotated);
  assert.match(rotated.stderr, /cluster secret: the webhooks now call with the new secret .*GMSA_CLUSTER_SECRET_ALPHA may hold the new one alone/);
  assert.equal(
    await webhookUrls(context),
    ["/mutate", "/validate", "/validate-credspec"].map((path) => `${base}/${memberSecrets[1]}${path}`),
  );

  const removal = await wire(context, ["--uninstall", "--apply"]);
  assert.is(removal.code, exitCodes.ok, removal.stderr);
});

Wiring("--cluster in relay mode: the relay's Secret holds the member's header; a new secret rolls the relay and the old one may go only once every pod is new", async (context) => {
  const ns = "relay-fleet";
  const deployment = `/apis/apps/v1/namespaces/${ns}/deployments/gmsa-admission-relay`;
  const keySecret = `/api/v1/namespaces/${ns}/secrets/gmsa-admission-relay-function-key`;
  const status = async (value: typeof rolledOut, generation?: number) => {
    const live = await get(context, deployment);
    const reply = await kubeRequest(
      context.admin,
      "PATCH",
      `${deployment}/status`,
      { status: { observedGeneration: generation ?? live.metadata.generation, readyReplicas: value.availableReplicas, ...value } },
      "application/merge-patch+json",
    );
    assert.is(reply.status, 200, JSON.stringify(reply.body));
  };
  const header = async () => Buffer.from((await get(context, keySecret)).data["cluster-secret.conf"], "base64").toString();
  const member = [...relayMode, "--namespace", ns, "--cluster", "alpha", "--apply"];

  const first = await wire(context, member, { GMSA_CLUSTER_SECRET: memberSecrets[0] });
  assert.is(first.code, exitCodes.ok, first.stderr);
  showsNoSecret(first);
  assert.is(await header(), `proxy_set_header x-gmsa-cluster-secret "${memberSecrets[0]}";\n`);
  const conf: string = (await get(context, `/api/v1/namespaces/${ns}/configmaps/gmsa-admission-relay`)).data["nginx.conf"];
  assert.match(conf, /proxy_pass https:\/\/gmsa_function\/clusters\/alpha\/mutate\$function_query;/);
  assert.equal((await get(context, webhookPaths[0]!)).webhooks[0].clientConfig.service.path, "/mutate", "the API server calls the relay on today's paths");
  await status(rolledOut);
  const before = await get(context, deployment);

  const plan = await wire(context, [...member, "--dry-run"], { GMSA_CLUSTER_SECRET: memberSecrets[1] });
  showsNoSecret(plan);
  assert.match(plan.stdout, /Secret\/relay-fleet\/gmsa-admission-relay-function-key: update data\["cluster-secret\.conf"\]/);
  assert.match(plan.stdout, /Deployment\/relay-fleet\/gmsa-admission-relay: update .*relay-config-checksum/);

  let finished = false;
  const running = wire(context, member, { GMSA_CLUSTER_SECRET: memberSecrets[1] }).then((run) => ((finished = true), run));
  const started = await until("the new pod template", async () => {
    const live = await get(context, deployment);
    return live.metadata.generation > before.metadata.generation ? live : undefined;
  });
  assert.is(await header(), `proxy_set_header x-gmsa-cluster-secret "${memberSecrets[1]}";\n`);
  await status(halfway, started.metadata.generation);
  await new Promise((r) => setTimeout(r, 1500));
  assert.not.ok(finished, "while old pods still send the old secret the wiring waits");
  await status(rolledOut, started.metadata.generation);
  const rotated = await running;
  assert.is(rotated.code, exitCodes.ok, rotated.stderr);
  showsNoSecret(rotated);
  assert.match(rotated.stderr, /cluster secret: every relay pod sends the new secret; GMSA_CLUSTER_SECRET_ALPHA may now hold the new one alone/);

  const slow = await wire(context, [...member, "--rollout-timeout-seconds", "1"], { GMSA_CLUSTER_SECRET: memberSecrets[2] });
  assert.is(slow.code, exitCodes.failed);
  showsNoSecret(slow);
  assert.match(slow.stderr, /Relay pods that still run send the old cluster secret: keep both in GMSA_CLUSTER_SECRET_ALPHA \("new,old"\)/);

  const same = await wire(context, member, { GMSA_CLUSTER_SECRET: memberSecrets[2] });
  assert.is(same.code, exitCodes.ok, same.stderr);
  assert.not.match(same.stderr, /cluster secret:/, "wiring again with the same secret replaces nothing and waits for nothing");
  const removal = await wire(context, ["--uninstall", "--apply", "--namespace", ns]);
  assert.is(removal.code, exitCodes.ok, removal.stderr);
});

Wiring.run();
