/**
 * Counters for the life of an instance, next to the per-admission ones: what /metrics shows and
 * what the cache reports when its watch breaks.
 */
export interface InstanceCounters {
  admissions: number;
  apiCalls: number;
  apiErrors: number;
  cacheHits: number;
  cacheMisses: number;
  watchRestarts: number;
  watchErrors: number;
}

export const instanceCounters: InstanceCounters = {
  admissions: 0,
  apiCalls: 0,
  apiErrors: 0,
  cacheHits: 0,
  cacheMisses: 0,
  watchRestarts: 0,
  watchErrors: 0,
};
