import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import schema from "../observability/audit-log.json";
import type { AdmissionRuntime } from "./runtime.js";

/**
 * The credential spec audit, once (GMSA_AUDIT, from the canary's timer): for every member the
 * runtime serves, lib/credspec/audit.ts over what its API server holds, read with the function's
 * own identity within a time budget. One `gmsa.audit` line per finding and one
 * `gmsa.auditSummary` line per member (lib/observability/audit-log.json), every line of one run
 * naming it (`run`), so that the workbook can tell what changed since the run before; a member
 * that could not be audited says why in its summary, so that no member goes silent.
 */
export type AuditLine = Record<string, string | number>;

const f = schema.fields;

export async function runAudit(
  runtime: AdmissionRuntime,
  options: { readonly randomHostname: boolean; readonly budgetMs?: number; readonly functionHost?: string },
): Promise<AuditLine[]> {
  const run = randomUUID();
  const summary = (cluster: string, outcome: string, counts: { errors: number; warnings: number; apiCalls: number }, latencyMs: number, reason: string): AuditLine => ({
    [f.event]: schema.summary,
    [f.cluster]: cluster,
    [f.run]: run,
    [f.outcome]: outcome,
    [f.errors]: counts.errors,
    [f.warnings]: counts.warnings,
    [f.apiCalls]: counts.apiCalls,
    [f.latencyMs]: latencyMs,
    [f.reason]: reason,
  });
  const none = { errors: 0, warnings: 0, apiCalls: 0 };
  const perMember = [...runtime.members.values()].map(async (member): Promise<AuditLine[]> => {
    const started = performance.now();
    const ended = (outcome: string, counts: typeof none, reason: string) => summary(member.name, outcome, counts, Math.round(performance.now() - started), reason);
    try {
      const ports = await member.start();
      if (!ports.audit) return [ended("failed", none, "this member's client cannot audit")];
      const audit = await ports.audit({
        randomHostname: options.randomHostname,
        signal: AbortSignal.timeout(options.budgetMs ?? 30_000),
        ...(options.functionHost ? { functionHost: options.functionHost } : {}),
      });
      const findings = audit.findings.map((finding): AuditLine => ({
        [f.event]: schema.finding,
        [f.cluster]: member.name,
        [f.run]: run,
        [f.kind]: finding.kind,
        [f.severity]: finding.severity,
        [f.object]: finding.object,
        [f.problem]: finding.problem,
        [f.action]: finding.action,
      }));
      const errors = audit.findings.filter((finding) => finding.severity === schema.errorSeverity).length;
      return [...findings, ended(schema.audited, { errors, warnings: audit.findings.length - errors, apiCalls: audit.apiCalls }, "")];
    } catch (error) {
      return [ended("failed", none, error instanceof Error ? error.message : String(error))];
    }
  });
  const unavailable = [...runtime.unavailable].map(([cluster, reason]) => summary(cluster, "failed", none, 0, `not served: ${reason}`));
  return [...(await Promise.all(perMember)).flat(), ...unavailable];
}

/** Whether a line is for the operator's attention: an error finding, or a member not audited. */
export function auditLineIsWarning(line: AuditLine): boolean {
  return (line[f.event] === schema.finding && line[f.severity] === schema.errorSeverity) || (line[f.event] === schema.summary && line[f.outcome] !== schema.audited);
}

/**
 * Whether the timer's run audits too: the first run of an instance does, and then one run once
 * `intervalMinutes` have passed since the last audit. A minute's slack keeps a run that fires a
 * little early (the timer's schedule is not exact) from waiting a whole further period.
 */
export function auditDue(lastAuditAt: number | undefined, now: number, intervalMinutes: number): boolean {
  return lastAuditAt === undefined || now - lastAuditAt >= Math.max(0, intervalMinutes - 1) * 60_000;
}
