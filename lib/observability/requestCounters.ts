import { instanceCounters } from "./instanceCounters.js";

/**
 * What one admission cost: API calls and cache answers. The caches and the Kubernetes adapter
 * count into the admission by the signal it hands to every port, so the policy ports need not
 * carry a counter. (By signal rather than by AsyncLocalStorage: without Node's async context
 * frames, which the Functions worker does not turn on, that runs promise hooks on every promise of
 * every admission, a fifth of the handler's CPU time.)
 */
export interface RequestCounters {
  apiCalls: number;
  apiErrors: number;
  cacheHits: number;
  cacheMisses: number;
}

const counting = new WeakMap<AbortSignal, RequestCounters>();

/** Runs an admission's work, counting what is done under its signal. */
export async function withRequestCounters<T>(signal: AbortSignal, work: () => Promise<T>): Promise<{ result: T; counters: RequestCounters }> {
  const counters: RequestCounters = { apiCalls: 0, apiErrors: 0, cacheHits: 0, cacheMisses: 0 };
  counting.set(signal, counters);
  const result = await work();
  return { result, counters };
}

/** Counts for the instance, and for the admission whose signal this is, if any. */
export function countRequest(field: keyof RequestCounters, signal: AbortSignal): void {
  instanceCounters[field] += 1;
  const counters = counting.get(signal);
  if (counters) counters[field] += 1;
}

/**
 * What is done under `derived`, a signal of its own made for an admission's call (a review that
 * other admissions may join and that must outlive none of them), counts for the admission whose
 * signal is `signal`.
 */
export function countUnder(derived: AbortSignal, signal: AbortSignal): void {
  const counters = counting.get(signal);
  if (counters) counting.set(derived, counters);
}
