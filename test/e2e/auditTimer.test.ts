import { suite } from "uvu";
import * as assert from "uvu/assert";
import { auditClusterRoleName, auditObjects } from "../../cluster/auditRbac.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { localWebhookUser } from "../../host/localCluster.js";
import { runAudit } from "../../lib/app/audit.js";
import { admissionRuntime } from "../../lib/app/runtime.js";
import schema from "../../lib/observability/audit-log.json";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { kubeRequest } from "../support/kubeRequest.js";

/**
 * The audit the canary's timer runs with GMSA_AUDIT, through a real API server with the function's
 * own identity and the audit's read-only role: one line per finding and a summary per cluster
 * that counts the API calls it made; without the role, a summary that says what to wire.
 */
const Timer = suite<{ cluster: E2eCluster }>("the credential spec audit of the canary's timer");

Timer.before(async (context) => {
  context.cluster = await startE2eCluster();
  await context.cluster.apply([
    ...(auditObjects({ kind: "User", name: localWebhookUser }) as KubernetesObject[]),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "audited" } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "use-a-typo", namespace: "audited" },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], resourceNames: ["webap1-credspec"], verbs: ["use"] }],
    },
  ]);
});

Timer.after(async ({ cluster }) => {
  await cluster?.close();
});

Timer("with the role: the finding, and a summary with the API calls of the run", async () => {
  const lines = await runAudit(await admissionRuntime(), { randomHostname: false });
  const typo = lines.find((line) => line.event === schema.finding && line.kind === "grantToMissingCredSpec" && line.object === "Role audited/use-a-typo");
  assert.ok(typo, JSON.stringify(lines, null, 1));
  assert.is(typo.cluster, "default");
  const summary = lines.find((line) => line.event === schema.summary)!;
  assert.is(summary.outcome, "audited", String(summary.reason));
  // One page each of credential specs, four RBAC kinds and pods, and a read of each of the
  // product's own nine objects: the cache is not asked.
  assert.is(summary.apiCalls, 15);
  assert.is(summary.warnings, lines.filter((line) => line.event === schema.finding && line.severity === "warning").length);
  for (const line of lines)
    assert.equal(
      Object.keys(line).every((key) => Object.values(schema.fields).includes(key)),
      true,
      JSON.stringify(line),
    );
});

Timer("without the role: a summary that says what to wire, and no finding", async ({ cluster }) => {
  const path = `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${auditClusterRoleName}`;
  assert.is((await kubeRequest(cluster.admin, "DELETE", path)).status, 200);
  const deadline = Date.now() + 10_000;
  let lines = await runAudit(await admissionRuntime(), { randomHostname: false });
  while (lines.some((line) => line.event === schema.summary && line.outcome === "audited") && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    lines = await runAudit(await admissionRuntime(), { randomHostname: false });
  }
  assert.equal(
    lines.map((line) => line.event),
    [schema.summary],
  );
  assert.is(lines[0]!.outcome, "failed");
  assert.match(String(lines[0]!.reason), /may not (list|get) .*npm run wire -- --audit/);
});

Timer.run();
