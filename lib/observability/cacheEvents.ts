import schema from "./cache-events.json";

/**
 * One structured line per change of a credential spec cache's state (cache-events.json, which the
 * workbook loads too): its first list and each resync after a broken watch, each failure of the
 * watch, a stop for good past its bounds, and answers served from what it knew while stale.
 */
export type CacheState = keyof typeof schema.states;

export interface CacheStateEvent {
  readonly state: CacheState;
  /** Specs held (synced, resynced, watchFailed), or lookups answered stale since the last such line (staleServed). */
  readonly specs: number;
  readonly reason: string;
}

/** The line, for `cluster`: "default" for a single cluster; a fleet's runtime names the member. */
export function cacheStateLine(cluster: string, event: CacheStateEvent): string {
  const f = schema.fields;
  return JSON.stringify({ [f.event]: schema.event, [f.cluster]: cluster, [f.state]: schema.states[event.state], [f.specs]: event.specs, [f.reason]: event.reason });
}

export const cacheStateLevel = (state: CacheState): "info" | "warn" => (state === "synced" || state === "resynced" ? "info" : "warn");
