import { app, type InvocationContext, type Timer } from "@azure/functions";
import { auditDue, auditLineIsWarning, runAudit } from "../lib/app/audit.js";
import { runCanary } from "../lib/app/canary.js";
import { admissionRuntime } from "../lib/app/runtime.js";
import { readPolicySettings } from "../lib/settings/admission.js";
import { readCanarySettings } from "../lib/settings/canary.js";
import { webhookAuthLevel } from "./webhook.js";

/**
 * The canary timer: every GMSA_CANARY_SCHEDULE (five minutes by default), a dry-run GMSA pod through
 * each cluster's real path, one gmsa.canary line per cluster (a warning when the path fails); with
 * GMSA_AUDIT, each cluster's credential spec audit after it, every GMSA_AUDIT_INTERVAL_MINUTES.
 */
export async function canary(_timer: Timer, context: InvocationContext): Promise<void> {
  const runtime = await admissionRuntime();
  for (const line of await runCanary(runtime)) {
    const text = JSON.stringify(line);
    if (line.outcome === "ready") context.info(text);
    else context.warn(text);
  }
  // GMSA_AUDIT: the same timer audits each cluster's credential spec health (lib/app/audit.ts).
  if (settings.audit && auditDue(lastAuditAt, Date.now(), settings.auditIntervalMinutes)) {
    lastAuditAt = Date.now();
    const options = { randomHostname: readPolicySettings().randomHostname, ...(settings.functionHost ? { functionHost: settings.functionHost } : {}) };
    for (const line of await runAudit(runtime, options)) {
      if (auditLineIsWarning(line)) context.warn(JSON.stringify(line));
      else context.info(JSON.stringify(line));
    }
  }
}

// Loaded first of the functions (by name): the endpoint settings are checked before anything
// registers, so that an app with a bad one registers no function at all.
webhookAuthLevel();
const settings = readCanarySettings();
let lastAuditAt: number | undefined;
if (settings.enabled) app.timer("canary", { schedule: settings.schedule, runOnStartup: false, handler: canary });
