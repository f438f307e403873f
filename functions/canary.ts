import { app, type InvocationContext, type Timer } from "@azure/functions";
import { runCanary } from "../lib/app/canary.js";
import { admissionRuntime } from "../lib/app/runtime.js";
import { readCanarySettings } from "../lib/settings/canary.js";
import { webhookAuthLevel } from "./webhook.js";

/**
 * The canary timer: every GMSA_CANARY_SCHEDULE (five minutes by default), a dry-run GMSA pod through
 * each cluster's real path, one gmsa.canary line per cluster (a warning when the path fails).
 */
export async function canary(_timer: Timer, context: InvocationContext): Promise<void> {
  const runtime = await admissionRuntime();
  for (const line of await runCanary(runtime)) {
    const text = JSON.stringify(line);
    if (line.outcome === "ready") context.info(text);
    else context.warn(text);
  }
}

// Loaded first of the functions (by name): the endpoint settings are checked before anything
// registers, so that an app with a bad one registers no function at all.
webhookAuthLevel();
const settings = readCanarySettings();
if (settings.enabled) app.timer("canary", { schedule: settings.schedule, runOnStartup: false, handler: canary });
