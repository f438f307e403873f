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
  uid: string;
  namespace: string;
  pod: string;
  decision: "allowed" | "patched" | "denied" | "error";
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

export function admissionLogLine(record: AdmissionRecord): string {
  const f = schema.fields;
  return JSON.stringify({
    [f.event]: schema.event,
    [f.cluster]: record.cluster,
    [f.webhook]: record.webhook,
    [f.operation]: record.operation,
    [f.uid]: record.uid,
    [f.namespace]: record.namespace,
    [f.pod]: record.pod,
    [f.decision]: record.decision,
    [f.code]: record.code,
    [f.reason]: record.reason,
    [f.credSpecs]: record.credSpecs,
    [f.correlationId]: record.correlationId,
    [f.detail]: record.detail,
    [f.latencyMs]: Math.round(record.latencyMs * 10) / 10,
    [f.cacheHits]: record.cacheHits,
    [f.cacheMisses]: record.cacheMisses,
    [f.apiCalls]: record.apiCalls,
    [f.apiErrors]: record.apiErrors,
    [f.coldStart]: record.coldStart,
  });
}
