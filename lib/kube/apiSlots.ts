/**
 * A cap on how many calls one instance has in flight towards one API server. A pod that names
 * many credential specs queues behind the cap instead of opening a connection per name; the
 * wait counts against the admission's own budget, and a waiter whose admission gives up leaves
 * the queue at once, so a dead admission never holds or blocks a slot.
 */
export interface ApiSlots {
  /** Resolves with the slot's release once one is free; rejects with the signal's reason if it aborts first. */
  take(signal: AbortSignal): Promise<() => void>;
  readonly inUse: number;
  readonly waiting: number;
  readonly limit: number;
}

interface Waiter {
  readonly grant: () => void;
}

export function apiSlots(limit: number): ApiSlots {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`the API call limit must be a whole number of at least 1, got ${limit}`);
  let inUse = 0;
  // Insertion-ordered: first come, first served; a waiter that gives up is deleted in place.
  const queue = new Set<Waiter>();

  const releaser = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = queue.values().next();
      if (next.done) {
        inUse -= 1;
        return;
      }
      // The slot passes straight to the next waiter: inUse does not change.
      queue.delete(next.value);
      next.value.grant();
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
        const onAbort = () => {
          queue.delete(waiter);
          reject(signal.reason);
        };
        const waiter: Waiter = {
          grant: () => {
            signal.removeEventListener("abort", onAbort);
            resolve(releaser());
          },
        };
        queue.add(waiter);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    },
    get inUse() {
      return inUse;
    },
    get waiting() {
      return queue.size;
    },
    limit,
  };
}
