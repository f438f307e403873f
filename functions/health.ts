import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { instanceCounters } from "../lib/observability/instanceCounters.js";
import { admissionRuntime } from "../lib/app/runtime.js";
import { webhookAuthLevel } from "./webhook.js";
import packageJson from "../package.json";

/**
 * GET /health: 200 `ok` once this instance has valid settings (and, with a single cluster, its
 * client started, as it always has been), 503 otherwise. A fleet's members are not started for a
 * probe: each starts on its first admission. A fleet with members kept out of service by their
 * own settings answers 200 `degraded`: the others serve, so the instance is not to be recycled,
 * but a deployment is not done.
 * Anyone who reaches the app may ask, so the reason (host names, paths, library errors, which
 * members) goes to the log and /metrics only.
 */
export async function health(_request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  try {
    // Ready or not, nothing more: how many credential specs the cache holds is for /metrics, which
    // function keys protect wherever they are required.
    const runtime = await admissionRuntime();
    // Which members, and why, were logged at start-up (gmsa.clusterUnavailable) and are in /metrics.
    if (runtime.unavailable.size > 0) return { status: 200, jsonBody: { status: "degraded" } };
    return { status: 200, jsonBody: { status: "ok" } };
  } catch (error) {
    context.error(`health: ${error instanceof Error ? error.message : String(error)}`);
    return { status: 503, jsonBody: { status: "unavailable" } };
  }
}

/**
 * GET /metrics: this instance's counters since it started, and each member's client: started or
 * idle, its credential spec cache, its last admission; or `unavailable` with the reason. Never a
 * secret, a path or an address.
 */
export async function metrics(): Promise<HttpResponseInit> {
  const runtime = await admissionRuntime();
  const clusters: Record<string, unknown> = {};
  let started = 0;
  for (const member of runtime.members.values()) {
    const status = member.status();
    if (status.state === "started") started += 1;
    clusters[member.name] = {
      state: status.state,
      admissions: status.admissions,
      starts: status.starts,
      lastAdmissionAt: status.lastAdmissionAt === undefined ? null : new Date(status.lastAdmissionAt).toISOString(),
      credSpecCache: status.credSpecCache ?? null,
    };
  }
  // Members kept out of service: why, as the settings said (a setting's name, never its value).
  for (const [name, reason] of runtime.unavailable) {
    clusters[name] = { state: "unavailable", reason, admissions: 0, starts: 0, lastAdmissionAt: null, credSpecCache: null };
  }
  // With a single cluster, its cache where it always was.
  const single = runtime.mode === "single" ? runtime.members.values().next().value?.status().credSpecCache : undefined;
  return {
    status: 200,
    jsonBody: { ...instanceCounters, credSpecCache: single ?? null, mode: runtime.mode, clustersStarted: started, clustersUnavailable: runtime.unavailable.size, clusters },
  };
}

/** GET /info: what is running. */
export async function info(): Promise<HttpResponseInit> {
  return { status: 200, jsonBody: { name: packageJson.name, version: packageJson.version, node: process.version } };
}

// Decided before anything is registered: a bad setting leaves the app with no function at all.
const metricsAuthLevel = webhookAuthLevel();
app.http("health", { route: "health", methods: ["GET"], authLevel: "anonymous", handler: health });
app.http("metrics", { route: "metrics", methods: ["GET"], authLevel: metricsAuthLevel, handler: metrics });
app.http("info", { route: "info", methods: ["GET"], authLevel: "anonymous", handler: info });
