import { parseArgs } from "node:util";
import type { AuditFinding } from "../lib/credspec/audit.js";
import { apiServerConnection } from "../lib/kube/apiServerConnection.js";
import { auditOverConnection } from "../lib/kube/auditReads.js";
import { readPolicySettings } from "../lib/settings/admission.js";
import { UsageError, type CredspecIo } from "./credspecInput.js";
import { exitCodes } from "./wire.js";

const readTimeoutMs = 10_000;
const auditBudgetMs = 120_000;

/**
 * `npm run credspec -- audit [--output table|json]`: the credential spec health of the cluster in
 * the current kubeconfig (lib/credspec/audit.ts), read with the kubeconfig's own rights as the
 * function's timer reads it (it lists credential specs, RBAC objects and pods, and changes nothing). Exit 1 when a finding is an
 * error, so that a pipeline can stop on it.
 */
export async function audit(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...args], strict: true, allowPositionals: true, options: { output: { type: "string", default: "table" } } });
  if (positionals.length > 0) throw new UsageError("audit takes no names: it reads the whole cluster");
  if (values.output !== "table" && values.output !== "json") throw new UsageError(`--output must be table or json, not ${values.output}`);
  const config = io.kubeConfig();
  // The same reads as the function's timer (lib/kube/auditReads.ts), with the kubeconfig's rights.
  const connection = apiServerConnection(config, { timeoutMs: readTimeoutMs });
  const audit = await auditOverConnection(connection, { randomHostname: readPolicySettings().randomHostname, signal: AbortSignal.timeout(auditBudgetMs) }).finally(() =>
    connection.close(),
  );
  const findings = audit.findings;
  if (values.output === "json") io.stdout(`${JSON.stringify({ findings }, null, 2)}\n`);
  else io.stdout(table(findings, audit.read.credSpecs, audit.read.pods));
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
