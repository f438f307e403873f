import { ClusterUnavailableError } from "../gmsa/ports.js";

/**
 * A cap on how many calls one instance has in flight towards one API server. A pod that names
 * many credential specs queues behind the cap instead of opening a connection per name; the
 * wait counts against the admission's own budget, and a waiter whose admission gives up leaves
 * the queue at once, so a dead admission never holds or blocks a slot. Free slots go round the
 * admissions in turn (each admission is known by its signal), so one admission with many calls
 * cannot make another wait behind all of them.
 *
 * It also bounds the admissions that wait on the server at all. When the server hangs, its slots
 * fill and every further admission would wait for its whole budget, holding one of the
 * instance's requests (shared by every member) with its body: an admission holds the server
 * from its first call, or from joining a review another admission asked, until that settles,
 * and once `limit + maxWaiting` admissions do, a new one is refused at once.
 */
export interface ApiSlots {
  /** Resolves with the slot's release once one is free; rejects with the signal's reason if it aborts first. */
  take(signal: AbortSignal): Promise<() => void>;
  readonly inUse: number;
  readonly waiting: number;
  readonly limit: number;
  readonly maxWaiting: number;
  /**
   * Counts the admission (known by its signal) as waiting on the server until the returned
   * function is called; throws a ClusterUnavailableError ("backedUp") when it is new and as many
   * admissions as may wait already do. An admission already counted may always go on.
   */
  hold(signal: AbortSignal): () => void;
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

export function apiSlots(limit: number, maxWaiting = Number.POSITIVE_INFINITY): ApiSlots {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`the API call limit must be a whole number of at least 1, got ${limit}`);
  if (!(maxWaiting >= 0)) throw new RangeError(`the most admissions waiting must be at least 0, got ${maxWaiting}`);
  const maxHeld = limit + maxWaiting;
  // Admission -> how many of its calls or joined reviews are under way.
  const holders = new Map<AbortSignal, number>();
  let inUse = 0;
  let waiting = 0;
  // One lane per admission, in the order they are to be served; each lane first come, first served.
  const lanes = new Map<AbortSignal, Lane>();

  const next = (): Waiter | undefined => {
    const first = lanes.entries().next();
    if (first.done) return undefined;
    const [signal, lane] = first.value;
    const waiter = lane.waiters.values().next().value!;
    lane.waiters.delete(waiter);
    waiting -= 1;
    // Served: its lane goes to the back, behind every other admission that waits.
    lanes.delete(signal);
    if (lane.waiters.size > 0) lanes.set(signal, lane);
    else lane.leave();
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
    take(signal) {
      if (signal.aborted) return Promise.reject(signal.reason);
      if (inUse < limit) {
        inUse += 1;
        return Promise.resolve(releaser());
      }
      return new Promise((resolve, reject) => {
        let lane = lanes.get(signal);
        if (!lane) {
          const waiters = new Set<Waiter>();
          // One listener per admission, however many of its calls wait: the whole lane leaves.
          const onAbort = () => {
            lanes.delete(signal);
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
    hold(signal) {
      const held = holders.get(signal);
      if (held === undefined && holders.size >= maxHeld) {
        throw new ClusterUnavailableError(
          `the cluster's API calls are backed up: ${holders.size} admissions already wait on its API server (${limit} calls at once, ${maxWaiting} more admissions waiting)`,
          "backedUp",
        );
      }
      holders.set(signal, (held ?? 0) + 1);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        const rest = holders.get(signal)! - 1;
        if (rest === 0) holders.delete(signal);
        else holders.set(signal, rest);
      };
    },
    get held() {
      return holders.size;
    },
  };
}
