import { suite } from "uvu";
import * as assert from "uvu/assert";
import { turnQueue } from "../../host/turnQueue.js";
import { afterAwaits, markNextCheckPhase, nextTurn, unexpectedReports } from "../support/checkPhases.js";

/** The local host's hand-over of bodies and answers: a turn's tasks run together in the next. */
const Queue = suite("turn queue");

const unexpected = unexpectedReports();

Queue("tasks of one turn run after it, together and in the order they came", async () => {
  const log: string[] = [];
  const queue = turnQueue(unexpected.report);
  queue.push(() => log.push("a"));
  queue.push(() => log.push("b"));
  queue.push(() => log.push("c"));
  assert.equal(log, [], "nothing runs within the turn");
  await nextTurn();
  assert.equal(log, ["a", "b", "c"]);
});

Queue("a task pushed while the queue runs, with no other run scheduled, waits for the turn after", async () => {
  const log: string[] = [];
  const queue = turnQueue(unexpected.report);
  queue.push(() => {
    log.push("first");
    queue.push(() => log.push("pushed by first"));
  });
  await nextTurn();
  assert.equal(log, ["first"]);
  await nextTurn();
  assert.equal(log, ["first", "pushed by first"]);
});

Queue("promises settled by a turn's tasks continue after all of them have run", async () => {
  const log: string[] = [];
  const queue = turnQueue(unexpected.report);
  const handedOver = ["a", "b"].map((name) => new Promise<string>((resolve) => queue.push(() => (log.push(`${name} handed over`), resolve(name)))));
  const continued = handedOver.map((p) => p.then((name) => log.push(`${name} continued`)));
  await Promise.all(continued);
  assert.equal(log, ["a handed over", "b handed over", "a continued", "b continued"]);
});

Queue("a task that throws is reported and the others still run; a report that throws goes no further", async () => {
  const log: string[] = [];
  const reported: string[] = [];
  const queue = turnQueue((error) => {
    reported.push(error instanceof Error ? error.message : String(error));
    throw new Error("the log is gone");
  });
  queue.push(() => log.push("before"));
  queue.push(() => {
    throw new Error("broken");
  });
  queue.push(() => log.push("after"));
  // An exception out of the turn would be uncaught and end the test process.
  await nextTurn();
  assert.equal(log, ["before", "after"]);
  assert.equal(reported, ["broken"]);
});

Queue("a follower runs in the same check phase, after what the leader's tasks lead to without I/O", async () => {
  const log: string[] = [];
  const follower = turnQueue(unexpected.report);
  const leader = turnQueue(unexpected.report, follower);
  leader.push(() => {
    log.push("task");
    markNextCheckPhase(log);
    afterAwaits(() => follower.push(() => log.push("follower")));
  });
  await nextTurn();
  await nextTurn();
  assert.equal(log, ["task", "follower", "next check phase"]);
});

Queue("without the link, what a queue's task pushes onto another waits for the next check phase", async () => {
  // The same as above with the follower left unlinked: this is what the link changes.
  const log: string[] = [];
  const other = turnQueue(unexpected.report);
  const queue = turnQueue(unexpected.report);
  queue.push(() => {
    log.push("task");
    markNextCheckPhase(log);
    afterAwaits(() => other.push(() => log.push("other")));
  });
  await nextTurn();
  await nextTurn();
  assert.equal(log, ["task", "next check phase", "other"]);
});

Queue("a follower whose run was scheduled before the leader's gets another behind it", async () => {
  const log: string[] = [];
  const follower = turnQueue(unexpected.report);
  const leader = turnQueue(unexpected.report, follower);
  follower.push(() => log.push("follower, pushed first"));
  leader.push(() => {
    log.push("leader");
    markNextCheckPhase(log);
    afterAwaits(() => follower.push(() => log.push("follower, pushed by the leader's task")));
  });
  await nextTurn();
  await nextTurn();
  assert.equal(log, ["follower, pushed first", "leader", "follower, pushed by the leader's task", "next check phase"]);
});

Queue("a reserved run takes what is pushed before it comes, behind what was scheduled before it", async () => {
  const log: string[] = [];
  const queue = turnQueue(unexpected.report);
  setImmediate(() => log.push("scheduled before the reservation"));
  queue.reserve();
  setImmediate(() => log.push("scheduled after the reservation"));
  queue.push(() => log.push("pushed after the reservation"));
  await nextTurn();
  assert.equal(log, ["scheduled before the reservation", "pushed after the reservation", "scheduled after the reservation"]);
});

Queue("one run per turn however many tasks come, and one more of the follower per run of its leader", async () => {
  const scheduled: string[] = [];
  const realSetImmediate = globalThis.setImmediate;
  const follower = turnQueue(unexpected.report);
  const leader = turnQueue(unexpected.report, follower);
  // Counts the runs the queues schedule; everything else goes on as before.
  globalThis.setImmediate = ((callback: (...args: unknown[]) => void, ...args: unknown[]) => {
    scheduled.push(callback.name || "run");
    return realSetImmediate(callback, ...args);
  }) as typeof setImmediate;
  try {
    for (let i = 0; i < 5; i++) leader.push(() => {});
    for (let i = 0; i < 5; i++) follower.push(() => {});
  } finally {
    globalThis.setImmediate = realSetImmediate;
  }
  assert.equal(scheduled.length, 2, `scheduled: ${scheduled.join(", ")}`);
  await nextTurn();
});

Queue.after.each(() => unexpected.assertNone());

Queue.run();
