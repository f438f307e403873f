import { isSharedPrincipal, sharedWorkCall, spareSlotCall, type PortCall, type Principal, type UseAuthorizer, type UseDecision } from "../gmsa/ports.js";
import { countRequest } from "../observability/requestCounters.js";
import { sharedFlight } from "./sharedFlight.js";

/**
 * Remembers `use` answers per (principal, namespace, credential spec) for a short time, and lets
 * concurrent identical questions share one access review. The price: a revoked grant keeps
 * working for up to the TTL. Denials are kept for a fifth of it, so a fresh grant works almost at
 * once; failures are never kept, and a shared review lives no longer than its waiters do.
 *
 * An answer used in the last fifth of its life is asked again ahead of its expiry, once, by a
 * review no admission waits on: a team whose pods keep coming finds the next answer already there
 * instead of all waiting, each holding the server (`hold`), on the one review its expiry needs,
 * and being refused past its namespace's share. Such a review holds no admission, so it takes an
 * API slot only when one is free at once (spareSlotCall), few run at once (`maxAhead`; past that
 * an answer expires as before), and each may take as long as an admission's own
 * (`aheadBudgetMs`), past the expiry of the answer it replaces. Every answer lives its TTL from
 * when its review answered, asked ahead or not, so a revoked grant works no longer than before.
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
  readonly hold?: (call: PortCall) => () => void;
  /** How long a review asked ahead of an answer's expiry may take, its calls' retries included (default 4 s). */
  readonly aheadBudgetMs?: number;
  /** How many reviews asked ahead may be under way at once (default 2): they hold nothing, and take API slots no admission waits for. */
  readonly maxAhead?: number;
}

export function useDecisionCache(inner: UseAuthorizer, options: UseDecisionCacheOptions): UseAuthorizer {
  if (options.ttlMs <= 0) return inner;
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? 10_000;
  const answers = new Map<string, Answer>();
  const aheadBudgetMs = Math.ceil(options.aheadBudgetMs ?? 4_000);
  if (!(aheadBudgetMs >= 1 && aheadBudgetMs <= 2 ** 31 - 1)) throw new RangeError(`the budget of a review asked ahead must be 1 ms to about 24 days, got ${options.aheadBudgetMs}`);
  const maxAhead = options.maxAhead ?? 2;
  if (!(Number.isInteger(maxAhead) && maxAhead >= 0)) throw new RangeError(`the most reviews asked ahead at once must be a whole number, got ${options.maxAhead}`);
  let ahead = 0;
  // Key -> marks its review asked ahead as waited on, once an admission joins it.
  const aheadUnderWay = new Map<string, () => void>();
  // Each admission waits only as long as its own signal allows; a review runs while anyone still
  // waits, and when the last one gives up it is stopped and forgotten.
  const reviews = sharedFlight<UseDecision>();

  /**
   * Asks the inner authorizer and keeps its answer. Every admission that waits on the review holds
   * the server itself (`hold`), so the review's own calls are not counted again; they wait for a
   * slot in their namespace's turn, which every waiter shares (the namespace is part of the key).
   * One asked ahead (`unwaited` given) waits for no slot while nobody waits on it.
   */
  const review = (key: string, principal: Principal, namespace: string, credSpecName: string, stop: AbortSignal, unwaited?: () => boolean): Promise<UseDecision> => {
    const call: PortCall = unwaited ? spareSlotCall(stop, namespace, unwaited) : options.hold ? sharedWorkCall(stop, namespace) : { signal: stop, namespace };
    return inner.mayUse(principal, namespace, credSpecName, call).then((decision) => {
      // A review stopped because nobody waited any more answers nobody: keep nothing from it.
      if (stop.aborted) return decision;
      const since = now();
      answers.delete(key);
      answers.set(key, { decision, since, expires: since + (decision.allowed ? options.ttlMs : options.ttlMs / 5), renewing: false });
      if (answers.size > maxEntries) answers.delete(answers.keys().next().value!);
      return decision;
    });
  };

  /** Starts the one review asked ahead of `known`'s expiry; no admission waits on it or is held for it. */
  const askAhead = (key: string, known: Answer, principal: Principal, namespace: string, credSpecName: string): void => {
    const budget = AbortSignal.timeout(aheadBudgetMs);
    known.renewing = true;
    ahead += 1;
    let waitedOn = false;
    const markWaitedOn = () => void (waitedOn = true);
    aheadUnderWay.set(key, markWaitedOn);
    reviews
      .join(key, budget, (stop) => review(key, principal, namespace, credSpecName, stop, () => !waitedOn))
      .catch(() => {})
      .finally(() => {
        ahead -= 1;
        if (aheadUnderWay.get(key) === markWaitedOn) aheadUnderWay.delete(key);
      });
  };

  return {
    async mayUse(principal, namespace, credSpecName, call) {
      const signal = call.signal;
      const key = cacheKey(principal, namespace, credSpecName);
      const known = answers.get(key);
      const at = now();
      if (known && known.expires > at) {
        countRequest("cacheHits", signal);
        if (!known.renewing && ahead < maxAhead && known.expires - at <= (known.expires - known.since) / 5) askAhead(key, known, principal, namespace, credSpecName);
        return known.decision;
      }
      if (known) answers.delete(key);
      countRequest("cacheMisses", signal);
      // Before a review is asked or joined: one refused leaves nothing behind.
      // Counted under the namespace the question is asked in, the one its key holds.
      const leave = options.hold?.({ signal, namespace });
      // An admission that joins a review asked ahead waits on it: from now on it queues for slots.
      // (One that has given up joins nothing.)
      if (!signal.aborted) aheadUnderWay.get(key)?.();
      // The review's calls count for the admission that asks it; those that join count a miss each.
      return reviews.join(key, signal, (stop) => review(key, principal, namespace, credSpecName, stop), leave);
    },
  };
}

interface Answer {
  readonly decision: UseDecision;
  /** When the review that gave it answered, and when it may no longer be used. */
  readonly since: number;
  readonly expires: number;
  /** A review ahead of its expiry was started (it is started once). */
  renewing: boolean;
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
