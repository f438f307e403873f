import { isSharedPrincipal, type Principal, type UseAuthorizer, type UseDecision } from "../gmsa/ports.js";
import { countRequest, countUnder } from "../observability/requestCounters.js";

/**
 * Remembers `use` answers per (principal, namespace, credential spec) for a short time, and lets
 * concurrent identical questions share one access review. The price: a revoked grant keeps
 * working for up to the TTL. Denials are kept for a fifth of it, so a fresh grant works almost at
 * once; failures are never kept, and a shared review lives no longer than its waiters do.
 */
export interface UseDecisionCacheOptions {
  readonly ttlMs: number;
  readonly now?: () => number;
  /** The most answers kept; the oldest go first. */
  readonly maxEntries?: number;
  /**
   * Counts an admission as waiting on the API server while it waits for a review (its own or
   * one it joined); throws, refusing it at once, when too many already do.
   */
  readonly hold?: (signal: AbortSignal, namespace: string) => () => void;
}

/** One access review that several admissions wait on, and how many still do. */
interface SharedReview {
  readonly decision: Promise<UseDecision>;
  readonly stop: AbortController;
  waiters: number;
}

export function useDecisionCache(inner: UseAuthorizer, options: UseDecisionCacheOptions): UseAuthorizer {
  if (options.ttlMs <= 0) return inner;
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? 10_000;
  const answers = new Map<string, { decision: UseDecision; expires: number }>();
  const inFlight = new Map<string, SharedReview>();

  const drop = (key: string, review: SharedReview) => {
    if (inFlight.get(key) === review) inFlight.delete(key);
  };

  // Each admission waits only as long as its own signal allows. The review itself runs while
  // anyone still waits: when the last one gives up it is stopped and forgotten, so it never
  // outlives the longest budget among its waiters and the next admission asks afresh.
  const wait = (key: string, review: SharedReview, signal: AbortSignal, leave: (() => void) | undefined): Promise<UseDecision> => {
    if (signal.aborted) {
      leave?.();
      return Promise.reject(signal.reason);
    }
    review.waiters += 1;
    return new Promise<UseDecision>((resolve, reject) => {
      const onAbort = () => {
        review.waiters -= 1;
        if (review.waiters === 0) {
          drop(key, review);
          review.stop.abort(signal.reason);
        }
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      review.decision.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    }).finally(() => leave?.());
  };

  return {
    async mayUse(principal, namespace, credSpecName, signal) {
      const key = cacheKey(principal, namespace, credSpecName);
      const known = answers.get(key);
      if (known && known.expires > now()) {
        countRequest("cacheHits", signal);
        return known.decision;
      }
      if (known) answers.delete(key);
      countRequest("cacheMisses", signal);
      // Before a review is asked or joined: one refused leaves nothing behind.
      const leave = options.hold?.(signal, namespace);
      const pending = inFlight.get(key);
      if (pending) return wait(key, pending, signal, leave);
      const stop = new AbortController();
      // The review's calls count for the admission that asks it; those that join count a miss each.
      countUnder(stop.signal, signal);
      const decision = inner.mayUse(principal, namespace, credSpecName, stop.signal).then((decision) => {
        // A review stopped because nobody waited any more answers nobody: keep nothing from it.
        if (stop.signal.aborted) return decision;
        answers.set(key, { decision, expires: now() + (decision.allowed ? options.ttlMs : options.ttlMs / 5) });
        if (answers.size > maxEntries) answers.delete(answers.keys().next().value!);
        return decision;
      });
      const review: SharedReview = { decision, stop, waiters: 0 };
      // A failed review is forgotten at once, so the next admission asks afresh.
      void decision.finally(() => drop(key, review)).catch(() => {});
      inFlight.set(key, review);
      return wait(key, review, signal, leave);
    },
  };
}

/**
 * Two JSON arrays one after the other: the first ends where its brackets close, so no principal,
 * namespace and name can be written like another. A principal the policy shares between
 * admissions (`sharedPrincipal`: frozen plain data) is written out once and remembered by
 * identity; any other, every time, since it could change after being seen.
 */
function cacheKey(principal: Principal, namespace: string, credSpecName: string): string {
  return `${principalKey(principal)}${JSON.stringify([namespace, credSpecName])}`;
}

const sharedPrincipalKeys = new WeakMap<Principal, string>();

function principalKey(principal: Principal): string {
  const known = sharedPrincipalKeys.get(principal);
  if (known !== undefined) return known;
  const extra = principal.extra ? Object.entries(principal.extra).sort(([a], [b]) => (a < b ? -1 : 1)) : [];
  const key = JSON.stringify([principal.user, principal.uid ?? "", [...principal.groups].sort(), extra, principal.serviceAccount ? 1 : 0]);
  if (isSharedPrincipal(principal)) sharedPrincipalKeys.set(principal, key);
  return key;
}
