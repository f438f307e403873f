/**
 * Work that becomes ready during a turn of the event loop, done together at the queue's next run,
 * in the order it came: in the next check phase, or later in the current one when a run is
 * already scheduled there (a leading queue reserved it: below). Under load a turn reads many
 * requests: doing each one's next step as it comes interleaves unlike work (TLS and HTTP parsing of
 * one request, the policy of another, the TLS write of a third), and each kind runs with the caches
 * the others left behind. Gathered, each kind runs back to back. An idle server pays one
 * `setImmediate` per task, and one more for a follower.
 *
 * A queue can lead another (`followedBy`): whenever it schedules its run, it also schedules a run
 * of the follower right behind it, even if the follower already has one scheduled earlier. Node
 * settles the promises, microtasks and `nextTick`s one `setImmediate` callback starts before it
 * calls the next, so whatever the leader's tasks lead to without waiting on I/O, a timer or another
 * immediate (a warm admission's whole policy) has pushed its work onto the follower by the time
 * that run comes, in the same check phase. Followers form a chain (a follower may lead a queue of
 * its own); a queue must not lead one that leads back to it, or its first push never returns.
 *
 * A task that throws is reported to `onError` and the others still run; a report that throws is
 * dropped, since nothing is left to tell and it must not escape the turn.
 */
export interface TurnQueue {
  push(task: () => void): void;
  /**
   * Schedules a run now, behind whatever the check phase already holds, even if one is already
   * scheduled (called during a check phase, it is the next one's). A run with nothing queued does
   * nothing.
   */
  reserve(): void;
}

export function turnQueue(onError: (error: unknown) => void, followedBy?: Pick<TurnQueue, "reserve">): TurnQueue {
  let pending: Array<() => void> = [];
  let runsScheduled = 0;
  const run = () => {
    runsScheduled -= 1;
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
    runsScheduled += 1;
    setImmediate(run);
    followedBy?.reserve();
  };
  return {
    push(task) {
      pending.push(task);
      if (runsScheduled === 0) reserve();
    },
    reserve,
  };
}
