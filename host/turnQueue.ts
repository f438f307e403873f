/**
 * Work that becomes ready during a turn of the event loop, done together at the start of the
 * next one (its check phase), in the order it came. Under load a turn reads many requests: doing
 * each one's next step as it comes interleaves unlike work (TLS and HTTP parsing of one request,
 * the policy of another, the TLS write of a third), and each kind runs with the caches the others
 * left behind. Gathered, each kind runs back to back. An idle server pays one `setImmediate` per
 * task.
 *
 * A queue can be followed by another (`followedBy`): whenever it schedules its run, the follower's
 * run is scheduled right behind it, if it is not scheduled already. Node settles the promises and
 * microtasks one `setImmediate` callback starts before it calls the next, so whatever this
 * queue's tasks lead to without waiting on I/O (a warm admission's whole policy) has pushed its
 * work onto the follower by the time the follower runs, in the same check phase.
 *
 * A task that throws is reported to `onError` and the others still run; a report that throws is
 * dropped, since nothing is left to tell and it must not escape the turn.
 */
export interface TurnQueue {
  push(task: () => void): void;
  /** Schedules the queue's run now, at this point of the check phase's order, even if it is empty. */
  reserve(): void;
}

export function turnQueue(onError: (error: unknown) => void, followedBy?: Pick<TurnQueue, "reserve">): TurnQueue {
  let pending: Array<() => void> = [];
  let scheduled = false;
  const run = () => {
    scheduled = false;
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
  const reserve = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(run);
    followedBy?.reserve();
  };
  return {
    push(task) {
      pending.push(task);
      reserve();
    },
    reserve,
  };
}
