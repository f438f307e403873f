import { countUnder } from "../observability/requestCounters.js";

/**
 * Work that concurrent callers asking for the same key share: the first starts it, the others
 * join it, and each waits only as long as its own signal allows. The work runs while anyone still
 * waits; when the last waiter gives up it is aborted and forgotten, so it never outlives the
 * longest budget among its waiters and the next caller starts it afresh. Settled work is forgotten
 * at once: this shares work in flight and keeps no answers. The API calls the work makes are
 * counted for the caller that started it.
 */
export interface SharedFlight<T> {
  /**
   * The answer of the work in flight for `key`, started with `start` when there is none; `start`
   * gets a signal of the work's own, aborted once nobody waits. `leave` runs once this caller has
   * its answer or has given up.
   */
  join(key: string, signal: AbortSignal, start: (stop: AbortSignal) => Promise<T>, leave?: () => void): Promise<T>;
}

interface Flight<T> {
  readonly answer: Promise<T>;
  readonly stop: AbortController;
  waiters: number;
}

export function sharedFlight<T>(): SharedFlight<T> {
  const inFlight = new Map<string, Flight<T>>();

  const drop = (key: string, flight: Flight<T>) => {
    if (inFlight.get(key) === flight) inFlight.delete(key);
  };

  const wait = (key: string, flight: Flight<T>, signal: AbortSignal, leave: (() => void) | undefined): Promise<T> => {
    flight.waiters += 1;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        flight.waiters -= 1;
        if (flight.waiters === 0) {
          drop(key, flight);
          flight.stop.abort(signal.reason);
        }
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      flight.answer.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    }).finally(() => leave?.());
  };

  return {
    join(key, signal, start, leave) {
      // Given up already: nothing is started or joined for it.
      if (signal.aborted) {
        leave?.();
        return Promise.reject(signal.reason);
      }
      const pending = inFlight.get(key);
      if (pending) return wait(key, pending, signal, leave);
      const stop = new AbortController();
      countUnder(stop.signal, signal);
      let answer: Promise<T>;
      try {
        answer = start(stop.signal);
      } catch (error) {
        leave?.();
        return Promise.reject(error);
      }
      const flight: Flight<T> = { answer, stop, waiters: 0 };
      // Failed work is forgotten as soon as it settles, like any other: the next caller starts it afresh.
      void answer.finally(() => drop(key, flight)).catch(() => {});
      inFlight.set(key, flight);
      return wait(key, flight, signal, leave);
    },
  };
}
