/**
 * Work that becomes ready during a turn of the event loop, done together at the start of the
 * next one (its check phase), in the order it came. Under load a turn reads many requests: doing
 * each one's next step as it comes interleaves unlike work (TLS and HTTP parsing of one request,
 * the policy of another, the TLS write of a third), and each kind runs with the caches the others
 * left behind. Gathered, each kind runs back to back. An idle server pays one `setImmediate` per
 * task.
 *
 * A task that throws is reported to `onError` and the others still run; a report that throws is
 * dropped, since nothing is left to tell and it must not escape the turn.
 */
export interface TurnQueue {
  push(task: () => void): void;
}

export function turnQueue(onError: (error: unknown) => void): TurnQueue {
  let pending: Array<() => void> = [];
  const run = () => {
    const tasks = pending;
    pending = [];
    for (const task of tasks) {
      try {
        task();
      } catch (error) {
        try {
          onError(error);
        } catch {
          // Nothing is left to tell.
        }
      }
    }
  };
  return {
    push(task) {
      if (pending.push(task) === 1) setImmediate(run);
    },
  };
}
