import { isSharedWorkCall, isSpareSlotCall, type PortCall } from "../gmsa/ports.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";

/**
 * A cap on how many calls one instance has in flight towards one API server. A pod that names
 * many credential specs queues behind the cap instead of opening a connection per name; the
 * wait counts against the admission's own budget, and a waiter whose admission gives up leaves
 * the queue at once, so a dead admission never holds or blocks a slot. Free slots go round the
 * namespaces in turn, and within each namespace round its lanes in turn: an admission's calls
 * (known by its signal), and each review several admissions share (by its own signal, carrying
 * their namespace). So one namespace with many admissions and reviews cannot make another
 * namespace wait behind all of them, nor one admission's many calls another's. Within one
 * namespace a shared review takes a turn of its own, like an admission; and every namespace takes
 * one turn whatever its load, so a namespace with many admissions waiting gets no larger share
 * than one with a single call.
 *
 * It also bounds the admissions that wait on the server at all. When the server hangs, its slots
 * fill and every further admission would wait for its whole budget, holding one of the
 * instance's requests (shared by every member) with its body: an admission holds the server
 * from its first call, or from joining a review another admission asked, until that settles;
 * the shared review's own calls hold nothing more.
 * The bound is kept per namespace: once `limit + maxWaiting` admissions of one namespace hold
 * the server, a new one of that namespace is refused at once, while another team's admission
 * still waits its turn (a flood from one namespace, or a hung server, sheds that namespace's
 * excess without refusing everyone else). An admission's namespace is the one its call carries
 * (PortCall, lib/gmsa/ports.ts), whichever port the call comes through; calls that carry none are
 * bounded together as one more namespace, "".
 * All holds together are bounded at `globalFactor` times one namespace's share; past that only
 * a namespace holding nothing may still wait, up to twice as many in all, so that a few
 * namespaces each within their share cannot refuse every other team.
 *
 * Above all of these sits `maxHeldAtAll`, the cluster's share of what one instance serves at once
 * (memberShare): every admission that waits on a hung server holds one of the instance's
 * concurrent invocations, and the instance's other clusters must keep some. It is never exceeded.
 * Within it, one namespace may hold all but a quarter of it (its flood leaves the rest to other
 * teams), and of those at most half that have waited longer than a prompt answer takes
 * (`slowAfterMs`), so a team whose calls are slow leaves the other half to the others, while a
 * burst of one namespace's admissions that the server answers promptly is not held to the half.
 */
export interface ApiSlots {
  /** Resolves with the slot's release once one is free; rejects with the signal's reason if the call's signal aborts first. */
  take(call: PortCall): Promise<() => void>;
  readonly inUse: number;
  readonly waiting: number;
  readonly limit: number;
  readonly maxWaiting: number;
  /**
   * Counts the admission (known by its call's signal) as waiting on the server until the returned
   * function is called; throws a ClusterUnavailableError ("backedUp") when it is new and as many
   * admissions of its namespace (or of all namespaces together) as may wait already do. An
   * admission already counted may always go on; work its waiters share holds nothing more.
   */
  hold(call: PortCall): () => void;
  /** How many admissions wait on the server now. */
  readonly held: number;
}

interface Waiter {
  readonly grant: (release: () => void) => void;
  readonly refuse: (reason: unknown) => void;
}

/** The calls of one admission that wait, and what to undo when none is left. */
interface Lane {
  readonly waiters: Set<Waiter>;
  readonly leave: () => void;
}

/** How many times one namespace's bound all holds together may reach. */
export const globalFactor = 4;

/**
 * What one cluster's admissions may hold of an instance's concurrent invocations while they wait
 * on its API server: all but a quarter (at least one) of them, which stays for the instance's
 * other clusters and its health probes. With Flex Consumption's 16 per instance: 12, and 6 for
 * one namespace.
 */
export function memberShare(instanceConcurrency: number): number {
  return Math.max(1, instanceConcurrency - Math.max(1, Math.floor(instanceConcurrency / 4)));
}

export interface ApiSlotsOptions {
  /** The cluster's share of an instance's concurrent invocations (memberShare); none: unbounded. */
  readonly maxHeldAtAll?: number;
  /** How long an admission may wait on the server before it counts as slow (default 250 ms). */
  readonly slowAfterMs?: number;
  readonly now?: () => number;
}

export function apiSlots(limit: number, maxWaiting = Number.POSITIVE_INFINITY, options: ApiSlotsOptions = {}): ApiSlots {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`the API call limit must be a whole number of at least 1, got ${limit}`);
  if (!(maxWaiting >= 0)) throw new RangeError(`the most admissions waiting must be at least 0, got ${maxWaiting}`);
  const maxHeldAtAll = options.maxHeldAtAll ?? Number.POSITIVE_INFINITY;
  if (!(maxHeldAtAll >= 1)) throw new RangeError(`the most admissions holding the server must be at least 1, got ${maxHeldAtAll}`);
  // One namespace never takes the whole share: a quarter of it (at least one) stays for the others.
  const namespaceShare = Number.isFinite(maxHeldAtAll) ? Math.max(1, maxHeldAtAll - Math.max(1, Math.floor(maxHeldAtAll / 4))) : Number.POSITIVE_INFINITY;
  const maxHeld = Math.min(limit + maxWaiting, namespaceShare);
  const maxHeldInAll = Math.min(maxHeld * globalFactor, maxHeldAtAll);
  const slowOfNamespace = Number.isFinite(maxHeldAtAll) ? Math.max(1, Math.ceil(maxHeldAtAll / 2)) : Number.POSITIVE_INFINITY;
  const slowAfterMs = options.slowAfterMs ?? 250;
  const now = options.now ?? Date.now;
  // Admission -> how many of its calls or joined reviews are under way, and the namespace it was counted under.
  const holders = new Map<AbortSignal, { count: number; readonly namespace: string; readonly since: number }>();
  // Namespace -> how many admissions of it hold the server.
  const byNamespace = new Map<string, number>();
  let inUse = 0;
  let waiting = 0;
  // One queue per namespace ("": calls of no namespace), in the order they
  // are to be served; in each, one lane per admission (or per review several admissions share),
  // in turn too; each lane first come, first served.
  const queues = new Map<string, Map<AbortSignal, Lane>>();

  const next = (): Waiter | undefined => {
    const firstQueue = queues.entries().next();
    if (firstQueue.done) return undefined;
    const [namespace, lanes] = firstQueue.value;
    const [signal, lane] = lanes.entries().next().value!;
    const waiter = lane.waiters.values().next().value!;
    lane.waiters.delete(waiter);
    waiting -= 1;
    // Served: its lane goes to the back of its namespace's queue, and the namespace behind every
    // other namespace that waits.
    lanes.delete(signal);
    if (lane.waiters.size > 0) lanes.set(signal, lane);
    else lane.leave();
    queues.delete(namespace);
    if (lanes.size > 0) queues.set(namespace, lanes);
    return waiter;
  };

  const releaser = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const waiter = next();
      // The slot passes straight to the next waiter: inUse does not change.
      if (waiter) waiter.grant(releaser());
      else inUse -= 1;
    };
  };

  return {
    take(call) {
      const signal = call.signal;
      if (signal.aborted) return Promise.reject(signal.reason);
      if (inUse < limit) {
        inUse += 1;
        return Promise.resolve(releaser());
      }
      if (isSpareSlotCall(call)) return Promise.reject(new ClusterUnavailableError("no API slot is free for work no admission waits on", "backedUp"));
      return new Promise((resolve, reject) => {
        const namespace = call.namespace ?? "";
        let lanes = queues.get(namespace);
        if (!lanes) {
          lanes = new Map();
          queues.set(namespace, lanes);
        }
        let lane = lanes.get(signal);
        if (!lane) {
          const waiters = new Set<Waiter>();
          const queue = lanes;
          // One listener per admission, however many of its calls wait: the whole lane leaves.
          const onAbort = () => {
            queue.delete(signal);
            if (queue.size === 0 && queues.get(namespace) === queue) queues.delete(namespace);
            waiting -= waiters.size;
            for (const waiter of waiters) waiter.refuse(signal.reason);
            waiters.clear();
          };
          signal.addEventListener("abort", onAbort, { once: true });
          lane = { waiters, leave: () => signal.removeEventListener("abort", onAbort) };
          lanes.set(signal, lane);
        }
        lane.waiters.add({ grant: resolve, refuse: reject });
        waiting += 1;
      });
    },
    get inUse() {
      return inUse;
    },
    get waiting() {
      return waiting;
    },
    limit,
    maxWaiting,
    hold(call) {
      // Work shared by admissions that each hold the server while they wait (lib/gmsa/ports.ts).
      if (isSharedWorkCall(call)) return () => {};
      const signal = call.signal;
      let holder = holders.get(signal);
      if (holder === undefined) {
        const namespace = call.namespace ?? "";
        const ofNamespace = byNamespace.get(namespace) ?? 0;
        const at = now();
        let slow = 0;
        if (Number.isFinite(slowOfNamespace) && ofNamespace >= slowOfNamespace) {
          for (const other of holders.values()) if (other.namespace === namespace && at - other.since >= slowAfterMs) slow += 1;
        }
        const roomInAll = holders.size < maxHeldAtAll && (holders.size < maxHeldInAll || (ofNamespace === 0 && holders.size < 2 * maxHeldInAll));
        if (ofNamespace >= maxHeld || slow >= slowOfNamespace || !roomInAll) {
          const who =
            ofNamespace >= maxHeld
              ? `${ofNamespace} admissions of namespace "${namespace}" already wait`
              : slow >= slowOfNamespace
                ? `${slow} admissions of namespace "${namespace}" have waited more than ${slowAfterMs} ms`
                : `${holders.size} admissions already wait`;
          const share = Number.isFinite(maxHeldAtAll) ? `; at most ${maxHeldAtAll} of an instance's concurrent requests wait on one cluster` : "";
          throw new ClusterUnavailableError(
            `the cluster's API calls are backed up: ${who} on its API server (${limit} calls at once, ${maxWaiting} more admissions waiting per namespace${share})`,
            "backedUp",
          );
        }
        byNamespace.set(namespace, ofNamespace + 1);
        holder = { count: 0, namespace, since: at };
        holders.set(signal, holder);
      }
      holder.count += 1;
      const counted = holder;
      let left = false;
      return () => {
        if (left) return;
        left = true;
        counted.count -= 1;
        if (counted.count > 0) return;
        holders.delete(signal);
        const others = byNamespace.get(counted.namespace)! - 1;
        if (others === 0) byNamespace.delete(counted.namespace);
        else byNamespace.set(counted.namespace, others);
      };
    },
    get held() {
      return holders.size;
    },
  };
}
