import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse, parseAllDocuments } from "yaml";
import { exitCodes, runWire } from "../../cluster/wire.js";

/** Rendering without --apply: plain YAML, no cluster contacted. */
const relay = [
  "--function-url",
  "https://func-gmsa.azurewebsites.net",
  "--mode",
  "relay",
  "--identity",
  "11111111-2222-3333-4444-555555555555",
  "--function-key",
  "AbCdEfGhIjKlMnOp0123==",
  // The relay's objects carry its function key and TLS key: stdout only when asked for by name.
  "--print-secrets",
];

async function wire(argv: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await runWire(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), kubeConfig: () => assert.unreachable("no cluster is contacted") as never });
  return { code, stdout, stderr };
}

const Render = suite("wire rendering");

Render("prints every object as YAML documents on stdout, in apply order", async () => {
  const run = await wire(relay);
  assert.is(run.code, exitCodes.ok, run.stderr);
  const objects = parseAllDocuments(run.stdout).map((d) => d.toJS());
  assert.equal(
    objects.map((o) => o.kind),
    [
      "CustomResourceDefinition",
      "ClusterRole",
      "ClusterRoleBinding",
      "Namespace",
      "ServiceAccount",
      "Role",
      "RoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "PriorityLevelConfiguration",
      "FlowSchema",
      "PriorityClass",
      "Namespace",
      "ServiceAccount",
      "ConfigMap",
      "Secret",
      "Secret",
      "Service",
      "NetworkPolicy",
      "Deployment",
      "PodDisruptionBudget",
      "MutatingWebhookConfiguration",
      "ValidatingWebhookConfiguration",
    ],
  );
  const conf: string = objects.find((o) => o.kind === "ConfigMap").data["nginx.conf"];
  assert.match(conf, /proxy_ssl_name func-gmsa\.azurewebsites\.net;/);
  const expression: string = objects.find((o) => o.kind === "MutatingWebhookConfiguration").webhooks[0].matchConditions[0].expression;
  assert.ok(expression.length > 200 && !expression.includes("\n"), "long CEL expressions stay on one line");
});

Render("--no-crd leaves the CRD out; url mode has no relay", async () => {
  const run = await wire(["--function-url", "https://func.example.com", "--mode", "url", "--identity", "x", "--no-crd"]);
  assert.equal(
    parseAllDocuments(run.stdout).map((d) => d.toJS().kind),
    [
      "ClusterRole",
      "ClusterRoleBinding",
      "Namespace",
      "ServiceAccount",
      "Role",
      "RoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "PriorityLevelConfiguration",
      "FlowSchema",
      "MutatingWebhookConfiguration",
      "ValidatingWebhookConfiguration",
    ],
  );
});

Render("--authorize-requesting-user lets the function's identity create SubjectAccessReviews; without it LocalSubjectAccessReviews only", async () => {
  const reviews = async (extra: string[]) => {
    const run = await wire(["--function-url", "https://func.example.com", "--mode", "url", "--identity", "x", ...extra]);
    assert.is(run.code, exitCodes.ok, run.stderr);
    const role = parseAllDocuments(run.stdout)
      .map((d) => d.toJS())
      .find((o) => o.kind === "ClusterRole");
    return role.rules.find((rule: { apiGroups: string[] }) => rule.apiGroups.includes("authorization.k8s.io")).resources;
  };
  assert.equal(await reviews([]), ["localsubjectaccessreviews"]);
  assert.equal(await reviews(["--authorize-requesting-user"]), ["localsubjectaccessreviews", "subjectaccessreviews"]);
  const help = await wire(["--help"]);
  assert.match(help.stdout, /--authorize-requesting-user/);
});

Render("the safety net is rendered by default, asks the requesting user too when the function does, and --no-safety-net leaves it out", async () => {
  const policies = (stdout: string) =>
    parseAllDocuments(stdout)
      .map((doc) => doc.toJS() as { kind: string; metadata: { name: string }; spec?: { validations?: { expression: string }[] } })
      .filter((object) => object.kind.startsWith("ValidatingAdmissionPolicy") && object.metadata.name.startsWith("gmsa-admission-") && !object.metadata.name.includes("canary"));
  const byDefault = await wire([...relay]);
  assert.equal(
    policies(byDefault.stdout).map((object) => `${object.kind}/${object.metadata.name}`),
    [
      "ValidatingAdmissionPolicy/gmsa-admission-pods",
      "ValidatingAdmissionPolicyBinding/gmsa-admission-pods",
      "ValidatingAdmissionPolicy/gmsa-admission-bindings",
      "ValidatingAdmissionPolicyBinding/gmsa-admission-bindings",
      "ValidatingAdmissionPolicy/gmsa-admission-credentialspecs",
      "ValidatingAdmissionPolicyBinding/gmsa-admission-credentialspecs",
    ],
  );
  const userRule = (stdout: string) => policies(stdout)[0]?.spec?.validations?.some((rule) => rule.expression.includes("|| authorizer.group(")) ?? false;
  assert.not.ok(userRule(byDefault.stdout));
  assert.ok(userRule((await wire([...relay, "--authorize-requesting-user"])).stdout));
  assert.equal(policies((await wire([...relay, "--no-safety-net"])).stdout), []);
});

Render("--audit adds the audit's read-only role, bound to the identity; by default it is not rendered", async () => {
  const names = (stdout: string) =>
    parseAllDocuments(stdout)
      .map((doc) => doc.toJS() as { kind: string; metadata: { name: string }; rules?: unknown; subjects?: unknown })
      .filter((object) => object.metadata.name === "gmsa-admission-audit");
  assert.equal(names((await wire([...relay])).stdout), []);
  const audit = names((await wire([...relay, "--audit"])).stdout);
  assert.equal(
    audit.map((object) => object.kind),
    ["ClusterRole", "ClusterRoleBinding"],
  );
  assert.equal(audit[0]!.rules, [
    { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
    { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], verbs: ["list"] },
    // The product's own wiring, read by name only: nobody else's webhooks or policies.
    {
      apiGroups: ["admissionregistration.k8s.io"],
      resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
      verbs: ["get"],
      resourceNames: ["gmsa-admission"],
    },
    {
      apiGroups: ["admissionregistration.k8s.io"],
      resources: ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
      verbs: ["get"],
      resourceNames: ["gmsa-admission-pods", "gmsa-admission-bindings", "gmsa-admission-credentialspecs"],
    },
    { apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get"], resourceNames: ["gmsacredentialspecs.windows.k8s.io"] },
    { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["list"] },
  ]);
});

Render("--out writes one numbered file per object, Secrets readable by their owner only", async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "gmsa-wire-out-")), "objects");
  const run = await wire([...relay, "--out", dir]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.is(run.stdout, "");
  const files = readdirSync(dir).sort();
  assert.is(files.length, 29);
  assert.is(files[0], "01-customresourcedefinition-gmsacredentialspecs.windows.k8s.io.yaml");
  assert.is(files[28], "29-validatingwebhookconfiguration-gmsa-admission.yaml");
  const secret = files.find((f) => f.includes("secret-gmsa-admission-relay-function-key"))!;
  assert.is(statSync(join(dir, secret)).mode & 0o777, 0o600);
  assert.is(parse(readFileSync(join(dir, files[25]!), "utf8")).kind, "Deployment");
});

Render("--certificate-out writes the relay certificate that the Secret and the caBundle carry", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-wire-cert-"));
  const run = await wire([...relay, "--certificate-out", dir]);
  const objects = parseAllDocuments(run.stdout).map((d) => d.toJS());
  const caBundle = Buffer.from(objects.find((o) => o.kind === "MutatingWebhookConfiguration").webhooks[0].clientConfig.caBundle, "base64").toString();
  assert.is(readFileSync(join(dir, "ca.crt"), "utf8"), caBundle);
  const tls = objects.find((o) => o.kind === "Secret" && o.metadata.name.endsWith("-tls"));
  assert.is(Buffer.from(tls.data["tls.crt"], "base64").toString(), readFileSync(join(dir, "tls.crt"), "utf8"));
  assert.is(statSync(join(dir, "tls.key")).mode & 0o777, 0o600);
});

Render("both webhook configurations carry the AKS Admissions Enforcer opt-out and exclude only kube-system and opted-out namespaces", async () => {
  for (const argv of [relay, ["--function-url", "https://func.example.com", "--mode", "url", "--identity", "x"]]) {
    const webhooks = parseAllDocuments((await wire(argv)).stdout)
      .map((d) => d.toJS())
      .filter((o) => o.kind.endsWith("WebhookConfiguration"));
    assert.is(webhooks.length, 2);
    for (const configuration of webhooks) {
      assert.is(configuration.metadata.annotations["admissions.enforcer/disabled"], "true");
      assert.equal(configuration.webhooks[0].namespaceSelector, {
        matchExpressions: [
          { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] },
          { key: "windows.k8s.io/disabled", operator: "NotIn", values: ["true"] },
        ],
      });
    }
  }
});

Render("the validating webhook receives Binding creations (both endpoints); the mutating one does not", async () => {
  const objects = parseAllDocuments((await wire(relay)).stdout).map((d) => d.toJS());
  const resources = (kind: string): string[] => objects.find((o) => o.kind === kind).webhooks[0].rules.flatMap((r: any) => r.resources);
  assert.ok(resources("ValidatingWebhookConfiguration").includes("pods/binding") && resources("ValidatingWebhookConfiguration").includes("bindings"));
  assert.not.ok(resources("MutatingWebhookConfiguration").some((r) => r.includes("binding")));
  const bindingRule = objects.find((o) => o.kind === "ValidatingWebhookConfiguration").webhooks[0].rules.find((r: any) => r.resources.includes("pods/binding"));
  assert.equal(bindingRule.operations, ["CREATE"]);
});

Render("the credential spec webhook: GMSACredentialSpec CREATE and UPDATE only, both versions, failing closed, at /validate-credspec", async () => {
  const run = await wire(["--function-url", "https://func-gmsa.azurewebsites.net", "--mode", "url", "--identity", "11111111-2222-3333-4444-555555555555"]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  const validating = parseAllDocuments(run.stdout)
    .map((d) => d.toJS())
    .find((o) => o.kind === "ValidatingWebhookConfiguration");
  const webhook = validating.webhooks.find((w: { name: string }) => w.name === "credspec.gmsa-admission.windows.k8s.io");
  assert.equal(webhook.rules, [
    { apiGroups: ["windows.k8s.io"], apiVersions: ["v1", "v1alpha1"], operations: ["CREATE", "UPDATE"], resources: ["gmsacredentialspecs"], scope: "Cluster" },
  ]);
  assert.equal(webhook.clientConfig, { url: "https://func-gmsa.azurewebsites.net/validate-credspec" });
  assert.is(webhook.failurePolicy, "Fail");
  assert.is(webhook.sideEffects, "None");
  assert.is(webhook.namespaceSelector, undefined);
  assert.is(webhook.matchConditions, undefined);
});

Render("relay objects carry the function key and the relay's TLS key: not on stdout unless --print-secrets, --out or --apply says so", async () => {
  const refused = await wire(relay.filter((arg) => arg !== "--print-secrets"));
  assert.is(refused.code, 2);
  assert.is(refused.stdout, "", "nothing secret is printed");
  assert.match(
    refused.stderr,
    /--mode relay: the objects carry the function key and the relay's TLS key, so they are not printed: write them with --out DIR .* or --apply; --print-secrets/,
  );
  assert.not.match(refused.stderr, /AbCdEfGhIjKlMnOp0123==/);
  const urlMode = await wire(["--function-url", "https://func-gmsa.azurewebsites.net", "--mode", "url", "--identity", "11111111-2222-3333-4444-555555555555"]);
  assert.is(urlMode.code, 0, "url objects carry no secret: printed as before");
  assert.match(urlMode.stdout, /kind: MutatingWebhookConfiguration/);
});

Render.run();
