import { AsyncLocalStorage } from "node:async_hooks";
import { instanceCounters } from "./instanceCounters.js";

/**
 * What one admission cost: API calls and cache answers. The Kubernetes adapter counts into the
 * admission it runs under without the policy ports having to carry a counter.
 */
export interface RequestCounters {
  apiCalls: number;
  apiErrors: number;
  cacheHits: number;
  cacheMisses: number;
}

const current = new AsyncLocalStorage<RequestCounters>();

export async function withRequestCounters<T>(work: () => Promise<T>): Promise<{ result: T; counters: RequestCounters }> {
  const counters: RequestCounters = { apiCalls: 0, apiErrors: 0, cacheHits: 0, cacheMisses: 0 };
  const result = await current.run(counters, work);
  return { result, counters };
}

export function countRequest(field: keyof RequestCounters): void {
  instanceCounters[field] += 1;
  const counters = current.getStore();
  if (counters) counters[field] += 1;
}
