import { KubeConfig } from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { readFileSync } from "node:fs";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import { runCredspec } from "../../cluster/credspecCommand.js";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import type { AuditFinding, AuditInput } from "../../lib/credspec/audit.js";
import auditSchema from "../../lib/observability/audit-log.json";
import { seededCluster, seededFindings } from "../support/auditSeed.js";
import { kubeRequest } from "../support/kubeRequest.js";

const repoRoot = join(__dirname, "..", "..");
/**
 * `npm run credspec -- audit` through a real kube-apiserver: a clean cluster gives no finding and
 * exit 0; the same cluster seeded with one example of each finding gives exactly those, and exit 1.
 * The cluster is wired as `npm run wire` wires one (its webhooks reach nothing here: the audit
 * reads them, and nothing is admitted meanwhile); objects that the wiring would refuse are seeded
 * with it lifted, as objects stored before it was there.
 */
const Audit = suite<{ controlPlane?: ControlPlane; admin: KubeConfig }>("credspec audit through a real API server", {} as { admin: KubeConfig });

Audit.before(async (context) => {
  context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
  context.admin = new KubeConfig();
  context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
  await applyObjects(context.admin, [
    credSpecCrd() as KubernetesObject,
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
    ...["default", "web", "other"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "apps" } })),
  ]);
  // The CRD is served a moment after it is stored.
  for (let i = 0; i < 100 && (await kubeRequest(context.admin, "GET", "/apis/windows.k8s.io/v1/gmsacredentialspecs")).status !== 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

Audit.after(async (context) => {
  await context.controlPlane?.stop();
});

/** The product's wiring, as rendered for this cluster. */
const wiring = clusterManifests({ target: { kind: "url", baseUrl: "https://127.0.0.1:1" }, subject: { kind: "User", name: "gmsa-webhook" } });

/** Stores `objects` with the webhooks and the safety net's bindings lifted, then wires the cluster again. */
async function seedUnchecked(admin: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const lifted = wiring.filter((object) => object.kind.endsWith("WebhookConfiguration") || object.kind === "ValidatingAdmissionPolicyBinding");
  for (const object of lifted) {
    const plural = `${object.kind.toLowerCase()}s`;
    await kubeRequest(admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/${plural}/${object.metadata.name}`);
  }
  // The API server stops calling a deleted webhook, or applying a deleted binding, a moment later.
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await applyObjects(admin, objects);
      break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  await applyObjects(admin, wiring);
}

async function audit(admin: KubeConfig): Promise<{ code: number; findings: AuditFinding[]; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCredspec(["audit", "--output", "json"], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    readFile: (path) => readFileSync(path),
    kubeConfig: () => admin,
  });
  return { code, findings: stdout ? (JSON.parse(stdout) as { findings: AuditFinding[] }).findings : [], stderr };
}

function objectsOf(input: AuditInput): KubernetesObject[] {
  const rbac = "rbac.authorization.k8s.io/v1";
  return [
    ...input.credSpecs.map((spec) => ({ apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: spec.name }, credspec: spec.credspec })),
    ...input.rbac.roles.map((role) => ({ apiVersion: rbac, kind: "Role", ...role })),
    ...input.rbac.roleBindings.map((binding) => ({ apiVersion: rbac, kind: "RoleBinding", ...binding, roleRef: { apiGroup: "rbac.authorization.k8s.io", ...binding.roleRef } })),
    ...(input.pods as Array<KubernetesObject & { spec: object }>).map((pod) => ({ ...pod, spec: { ...pod.spec, nodeName: "node-1" } })),
  ] as KubernetesObject[];
}

Audit("a clean cluster: no finding, exit 0", async (context) => {
  await seedUnchecked(context.admin, objectsOf(seededCluster(true)));
  const result = await audit(context.admin);
  assert.equal(result.findings, [], result.stderr);
  assert.is(result.code, 0, result.stderr);
});

Audit("seeded with one example of each finding: exactly those, exit 1", async (context) => {
  await seedUnchecked(context.admin, objectsOf(seededCluster(false)));
  const result = await audit(context.admin);
  assert.equal(result.findings.map((f) => `${f.severity} ${f.kind} ${f.object}`).sort(), seededFindings, result.stderr);
  assert.is(result.code, 1);
  let table = "";
  const code = await runCredspec(["audit"], { stdout: (text) => (table += text), stderr: () => {}, readFile: (path) => readFileSync(path), kubeConfig: () => context.admin });
  assert.is(code, 1);
  assert.match(table, /^SEVERITY\s+KIND\s+OBJECT\s+PROBLEM/m);
  assert.match(table, /error\s+podCredSpecMissing\s+Pod apps\/gone-0\s+names GMSACredentialSpec "deleted-spec", which no longer exists\s+→ create it again/);
  assert.match(table, /3 credential specs and 5 pods read: 3 errors, 4 warnings\n$/);
});

Audit("the canary's timer, registered with @azure/functions and invoked as the worker invokes it, logs exactly those findings", async (context) => {
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", join(repoRoot, "test", "support", "timerDriver.ts"), "canary"], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, KUBECONFIG: context.controlPlane!.kubeconfigPath, GMSA_AUDIT: "true" },
    encoding: "utf8",
    timeout: 60_000,
  });
  const logged = JSON.parse(stdout) as Array<{ level: string; category: string; message: string }>;
  const lines = logged
    .filter((entry) => entry.category === "user" && entry.message.startsWith("{"))
    .map((entry) => ({ level: entry.level, line: JSON.parse(entry.message) as Record<string, unknown> }));
  const findings = lines.filter(({ line }) => line[auditSchema.fields.event] === auditSchema.finding);
  assert.equal(findings.map(({ line }) => `${line["severity"]} ${line["kind"]} ${line["object"]}`).sort(), seededFindings);
  // An error finding is a warning for the host, a warning finding information.
  for (const { level, line } of findings) assert.is(level, line["severity"] === "error" ? "warning" : "information", JSON.stringify(line));
  const summary = lines.find(({ line }) => line[auditSchema.fields.event] === auditSchema.summary)!.line;
  assert.equal([summary["cluster"], summary["outcome"], summary["errors"], summary["warnings"]], ["default", "audited", 3, 4]);
  // One list (of one page) each of credential specs, pods and the four RBAC kinds, and a read of each
  // of the product's own objects (two webhook configurations, the CRD, three policies and their
  // bindings): the extra calls of a run.
  assert.is(summary["apiCalls"], 15);
  assert.is(new Set(lines.filter(({ line }) => auditSchema.fields.run in line).map(({ line }) => line[auditSchema.fields.run])).size, 1);
});

Audit("the wiring changed by hand: a webhook switched to Ignore and a safety net binding deleted are errors, exit 1", async (context) => {
  const path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gmsa-admission";
  const stored = (await kubeRequest(context.admin, "GET", path)).body as { webhooks: Array<{ name: string; failurePolicy: string }> };
  stored.webhooks.find((webhook) => webhook.name === "validate.gmsa-admission.windows.k8s.io")!.failurePolicy = "Ignore";
  assert.is((await kubeRequest(context.admin, "PUT", path, stored)).status, 200);
  assert.is((await kubeRequest(context.admin, "DELETE", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/gmsa-admission-pods")).status, 200);
  const result = await audit(context.admin);
  const wiringFound = result.findings.filter((f) => f.kind.startsWith("wiring"));
  assert.equal(
    wiringFound.map((f) => `${f.severity} ${f.kind} ${f.object}`),
    [
      "error wiringChanged ValidatingWebhookConfiguration gmsa-admission (validate.gmsa-admission.windows.k8s.io)",
      "error wiringMissing ValidatingAdmissionPolicyBinding gmsa-admission-pods",
    ],
  );
  assert.match(wiringFound[0]!.problem, /failurePolicy: rendered "Fail", stored "Ignore"/);
  assert.is(result.code, 1);
  // Wired again, as the finding says: nothing of the wiring is left to report.
  await applyObjects(context.admin, wiring);
  assert.equal(
    (await audit(context.admin)).findings.filter((f) => f.kind.startsWith("wiring")),
    [],
  );
});

Audit.run();
