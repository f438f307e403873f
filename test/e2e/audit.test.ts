import { KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../cluster/credSpecCrd.js";
import { runCredspec } from "../../cluster/credspecCommand.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import type { AuditFinding, AuditInput } from "../../lib/credspec/audit.js";
import { seededCluster, seededFindings } from "../support/auditSeed.js";
import { kubeRequest } from "../support/kubeRequest.js";

/**
 * `npm run credspec -- audit` through a real kube-apiserver: a clean cluster gives no finding and
 * exit 0; the same cluster seeded with one example of each finding gives exactly those, and exit 1.
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
  await applyObjects(context.admin, objectsOf(seededCluster(true)));
  const result = await audit(context.admin);
  assert.equal(result.findings, [], result.stderr);
  assert.is(result.code, 0, result.stderr);
});

Audit("seeded with one example of each finding: exactly those, exit 1", async (context) => {
  await applyObjects(context.admin, objectsOf(seededCluster(false)));
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

Audit.run();
