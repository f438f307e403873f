import schema from "./admission-log.json";
import type { RequestCounters } from "./requestCounters.js";

/**
 * One structured line per admission. Field names come from admission-log.json, which the
 * monitoring queries in infra/ load too, so the code and the dashboards cannot disagree.
 * Never carries credential spec contents or tokens.
 */

export interface AdmissionRecord extends RequestCounters {
  /** The fleet member the admission came from (the single-cluster settings make one named "default"). */
  cluster: string;
  webhook: string;
  operation: string;
  /** A server-side dry run (the canary's, or kubectl --dry-run=server): nothing was stored; the business charts leave it out. */
  dryRun: boolean;
  uid: string;
  namespace: string;
  pod: string;
  /**
   * allowed; patched (mutate changed the pod); unchanged (mutate inlined none of the specs the pod
   * names: validation will decide); denied (the policy refused: 403, 422); invalid (a malformed
   * request, 400: no policy decision, so never counted as a denial); error (5xx).
   */
  decision: "allowed" | "patched" | "unchanged" | "denied" | "invalid" | "error";
  code: number;
  reason: string;
  credSpecs: readonly string[];
  /** Set when the pod was refused because of a failure: the ID the pod creator was given. */
  correlationId: string;
  /** That failure's details (host names, causes): for operators, never sent to the pod creator. */
  detail: string;
  latencyMs: number;
  coldStart: boolean;
}

const f = schema.fields;

// Every line has the schema's fields in the schema's order: each starts as a copy of this one, so
// that it is built on one object shape rather than by adding computed keys one by one.
const lineShape: Record<string, unknown> = Object.fromEntries(Object.values(f).map((key) => [key, null]));

export function admissionLogLine(record: AdmissionRecord): string {
  const line = { ...lineShape };
  line[f.event] = schema.event;
  line[f.cluster] = record.cluster;
  line[f.webhook] = record.webhook;
  line[f.operation] = record.operation;
  line[f.dryRun] = record.dryRun;
  line[f.uid] = record.uid;
  line[f.namespace] = record.namespace;
  line[f.pod] = record.pod;
  line[f.decision] = record.decision;
  line[f.code] = record.code;
  line[f.reason] = record.reason;
  line[f.credSpecs] = record.credSpecs;
  line[f.correlationId] = record.correlationId;
  line[f.detail] = record.detail;
  line[f.latencyMs] = Math.round(record.latencyMs * 10) / 10;
  line[f.cacheHits] = record.cacheHits;
  line[f.cacheMisses] = record.cacheMisses;
  line[f.apiCalls] = record.apiCalls;
  line[f.apiErrors] = record.apiErrors;
  line[f.coldStart] = record.coldStart;
  return JSON.stringify(line);
}
