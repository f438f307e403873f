import type { Principal, UseAuthorizer, UseDecision } from "../gmsa/ports.js";
import { countRequest } from "../observability/requestCounters.js";

/**
 * Remembers `use` answers per (principal, namespace, credential spec) for a short time, and lets
 * concurrent identical questions share one access review. The price: a revoked grant keeps
 * working for up to the TTL. Denials are kept for a fifth of it, so a fresh grant works almost at
 * once; failures are never kept.
 */
export interface UseDecisionCacheOptions {
  readonly ttlMs: number;
  readonly now?: () => number;
  /** The most answers kept; the oldest go first. */
  readonly maxEntries?: number;
}

export function useDecisionCache(inner: UseAuthorizer, options: UseDecisionCacheOptions): UseAuthorizer {
  if (options.ttlMs <= 0) return inner;
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? 10_000;
  const answers = new Map<string, { decision: UseDecision; expires: number }>();
  const inFlight = new Map<string, Promise<UseDecision>>();

  return {
    async mayUse(principal, namespace, credSpecName, signal) {
      const key = cacheKey(principal, namespace, credSpecName);
      const known = answers.get(key);
      if (known && known.expires > now()) {
        countRequest("cacheHits");
        return known.decision;
      }
      if (known) answers.delete(key);
      countRequest("cacheMisses");
      const pending = inFlight.get(key);
      if (pending) return untilAborted(pending, signal);
      // The shared review runs on its own: one admission running out of time must not fail the
      // others waiting on the same answer. The inner authorizer still bounds each call.
      const asking = inner
        .mayUse(principal, namespace, credSpecName, new AbortController().signal)
        .then((decision) => {
          answers.set(key, { decision, expires: now() + (decision.allowed ? options.ttlMs : options.ttlMs / 5) });
          if (answers.size > maxEntries) answers.delete(answers.keys().next().value!);
          return decision;
        })
        .finally(() => inFlight.delete(key));
      inFlight.set(key, asking);
      return untilAborted(asking, signal);
    },
  };
}

function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function cacheKey(principal: Principal, namespace: string, credSpecName: string): string {
  const extra = principal.extra ? Object.entries(principal.extra).sort(([a], [b]) => (a < b ? -1 : 1)) : [];
  return JSON.stringify([principal.user, principal.uid ?? "", [...principal.groups].sort(), extra, principal.serviceAccount ? 1 : 0, namespace, credSpecName]);
}
