import * as t from "io-ts";
import { booleanSetting, decodeWith, emptyAsUnset, integerSetting, withDefault } from "./environment.js";

/**
 * The canary's timer: on by default, every five minutes. The schedule is the Functions timer's
 * NCRONTAB expression (six fields, seconds first), checked here so that a typo stops the app at
 * start instead of a timer that never fires.
 */
export interface CanarySettings {
  readonly enabled: boolean;
  readonly schedule: string;
  /** GMSA_AUDIT: each run also audits every cluster's credential spec health (lib/credspec/audit.ts). Off by default: it needs the audit's read-only role. */
  readonly audit: boolean;
  /** GMSA_AUDIT_INTERVAL_MINUTES: the audit runs with the canary's first run and then once this long has passed. Default 15. */
  readonly auditIntervalMinutes: number;
  /** WEBSITE_HOSTNAME, which Azure sets on a Function App: where URL-wired webhooks should call it. */
  readonly functionHost?: string;
}

const schedule = new t.Type<string, string, unknown>(
  "GMSA_CANARY_SCHEDULE",
  (value): value is string => typeof value === "string",
  (value, context) =>
    typeof value === "string" && /^(\S+\s+){5}\S+$/.test(value.trim())
      ? t.success(value.trim())
      : t.failure(value, context, `GMSA_CANARY_SCHEDULE must be a six-field NCRONTAB expression such as "0 */5 * * * *", got ${JSON.stringify(value)}`),
  (value) => value,
);

const hostNameWithPort = /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d+)?$/;

/** WEBSITE_HOSTNAME, trimmed: a host name, with a port on a local host; the host name alone is kept. */
const websiteHostName = new t.Type<string, string, unknown>(
  "WEBSITE_HOSTNAME",
  (value): value is string => typeof value === "string",
  (value, context) =>
    typeof value === "string" && hostNameWithPort.test(value)
      ? t.success(value.replace(/:\d+$/, ""))
      : t.failure(value, context, `WEBSITE_HOSTNAME must be a host name, got ${JSON.stringify(value)}`),
  (value) => value,
);

const CanaryEnvironment = t.type({
  GMSA_CANARY: withDefault(booleanSetting("GMSA_CANARY"), true),
  GMSA_CANARY_SCHEDULE: withDefault(schedule, "0 */5 * * * *"),
  GMSA_AUDIT: withDefault(booleanSetting("GMSA_AUDIT"), false),
  GMSA_AUDIT_INTERVAL_MINUTES: withDefault(integerSetting("GMSA_AUDIT_INTERVAL_MINUTES", 1, 1440), 15),
  WEBSITE_HOSTNAME: t.union([websiteHostName, t.undefined]),
});

export function readCanarySettings(env: NodeJS.ProcessEnv = process.env): CanarySettings {
  const names = ["GMSA_CANARY", "GMSA_CANARY_SCHEDULE", "GMSA_AUDIT", "GMSA_AUDIT_INTERVAL_MINUTES"];
  const raw = decodeWith(CanaryEnvironment, { ...emptyAsUnset(env, names), WEBSITE_HOSTNAME: env.WEBSITE_HOSTNAME?.trim() || undefined });
  return {
    enabled: raw.GMSA_CANARY,
    schedule: raw.GMSA_CANARY_SCHEDULE,
    audit: raw.GMSA_AUDIT,
    auditIntervalMinutes: raw.GMSA_AUDIT_INTERVAL_MINUTES,
    ...(raw.WEBSITE_HOSTNAME ? { functionHost: raw.WEBSITE_HOSTNAME } : {}),
  };
}
