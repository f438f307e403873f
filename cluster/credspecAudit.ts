import { parseArgs } from "node:util";
import { auditCluster, type AuditFinding } from "../lib/credspec/audit.js";
import { RbacBinding, RbacList, RbacRole } from "../lib/credspec/rbacUse.js";
import { readPolicySettings } from "../lib/settings/admission.js";
import { UsageError, type CredspecIo } from "./credspecInput.js";
import { decoded } from "./credspecInspect.js";
import { withKubeObjects } from "./kubeObjects.js";
import { exitCodes } from "./wire.js";

/**
 * `npm run credspec -- audit [--output table|json]`: the credential spec health of the cluster in
 * the current kubeconfig (lib/credspec/audit.ts), read with the kubeconfig's own rights (it lists
 * credential specs, RBAC objects and pods, and changes nothing). Exit 1 when a finding is an
 * error, so that a pipeline can stop on it.
 */
export async function audit(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...args], strict: true, allowPositionals: true, options: { output: { type: "string", default: "table" } } });
  if (positionals.length > 0) throw new UsageError("audit takes no names: it reads the whole cluster");
  if (values.output !== "table" && values.output !== "json") throw new UsageError(`--output must be table or json, not ${values.output}`);
  const rbac = "rbac.authorization.k8s.io/v1";
  const [credSpecs, clusterRoles, roles, clusterRoleBindings, roleBindings, pods] = await withKubeObjects(io.kubeConfig(), (client) =>
    Promise.all([
      client.list("windows.k8s.io/v1", "GMSACredentialSpec"),
      client.list(rbac, "ClusterRole").then((items) => decoded(RbacList(RbacRole), { items }, "ClusterRoles").items),
      client.list(rbac, "Role").then((items) => decoded(RbacList(RbacRole), { items }, "Roles").items),
      client.list(rbac, "ClusterRoleBinding").then((items) => decoded(RbacList(RbacBinding), { items }, "ClusterRoleBindings").items),
      client.list(rbac, "RoleBinding").then((items) => decoded(RbacList(RbacBinding), { items }, "RoleBindings").items),
      client.list("v1", "Pod"),
    ]),
  );
  const findings = auditCluster({
    credSpecs: credSpecs.map((spec) => ({ name: spec.metadata.name, credspec: (spec as { credspec?: unknown }).credspec })),
    rbac: { clusterRoles, roles, clusterRoleBindings, roleBindings },
    pods,
    randomHostname: readPolicySettings().randomHostname,
  });
  if (values.output === "json") io.stdout(`${JSON.stringify({ findings }, null, 2)}\n`);
  else io.stdout(table(findings, credSpecs.length, pods.length));
  return findings.some((finding) => finding.severity === "error") ? exitCodes.failed : exitCodes.ok;
}

function table(findings: readonly AuditFinding[], specs: number, pods: number): string {
  const summary = `${specs} credential specs and ${pods} pods read: ${findings.filter((f) => f.severity === "error").length} errors, ${findings.filter((f) => f.severity === "warning").length} warnings\n`;
  if (findings.length === 0) return summary;
  const rows = [["SEVERITY", "KIND", "OBJECT", "PROBLEM", "WHAT TO DO"], ...findings.map((f) => [f.severity, f.kind, f.object, f.problem, f.action])];
  const widths = rows[0]!.slice(0, 3).map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const lines = rows.map((row) => [...row.slice(0, 3).map((cell, column) => cell.padEnd(widths[column]!)), row[3], `→ ${row[4]}`].join("  ").trimEnd());
  return `${lines.join("\n")}\n${summary}`;
}
