import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { admissionDeadline } from "../../../lib/admission/deadline.js";

/** Holds the event loop in the current turn for `ms`, as a large review's decode and policy would. */
function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

function abortedAt(signal: AbortSignal): Promise<number> {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(performance.now()), { once: true }));
}

const deadline = suite("admission deadline");

deadline("an admission still waiting after its turn is aborted once its budget is spent, counted from its start", async () => {
  const started = performance.now();
  const d = admissionDeadline(100);
  const aborted = abortedAt(d.signal);
  // The turn that started the admission takes most of the budget: what is left is what it waits.
  busyFor(90);
  const at = await aborted;
  // Node's timers count whole milliseconds from the loop's cached clock: one may fire up to about
  // a millisecond early by performance.now() (a run read 99.0 ms, below a bound of 99).
  assert.ok(at - started >= 97, `aborted after ${(at - started).toFixed(1)} ms, before the budget of 100 ms was spent`);
  // Counted from when the deadline was armed, it would have waited another 100 ms after the busy turn.
  assert.ok(at - started < 170, `aborted after ${(at - started).toFixed(1)} ms: the budget was counted from after the first turn`);
  assert.match(String((d.signal.reason as Error).message), "admission budget of 100 ms spent");
  d.finish();
});

deadline("a turn longer than the whole budget aborts the admission as soon as it is over", async () => {
  const d = admissionDeadline(5);
  busyFor(20);
  assert.not.ok(d.signal.aborted, "nothing aborts within the turn");
  const ended = performance.now();
  const at = await abortedAt(d.signal);
  assert.ok(at - ended < 100, `aborted ${(at - ended).toFixed(1)} ms after the turn`);
});

deadline("an admission answered in time is never aborted, whether it waited or not", async () => {
  const sameTurn = admissionDeadline(1);
  sameTurn.finish();
  const waited = admissionDeadline(10);
  await nextTurn();
  await nextTurn();
  waited.finish();
  let settled = false;
  void sameTurn.expired().catch(() => (settled = true));
  void waited.expired().catch(() => (settled = true));
  await sleep(40);
  assert.not.ok(sameTurn.signal.aborted);
  assert.not.ok(waited.signal.aborted);
  assert.not.ok(settled, "expired() rejected for an admission that finished");
});

deadline("of many admissions started in one turn, exactly those still waiting after it are aborted, whatever order the others finish in", async () => {
  const deadlines = Array.from({ length: 12 }, () => admissionDeadline(5));
  const answered = new Set([11, 0, 5, 6, 2, 9]);
  for (const i of answered) deadlines[i]!.finish();
  // Finishing twice changes nothing.
  deadlines[5]!.finish();
  await sleep(40);
  deadlines.forEach((d, i) => assert.is(d.signal.aborted, !answered.has(i), `admission ${i}`));
});

deadline("expired() rejects with the signal's reason a turn after the abort, so a port's own reason comes first", async () => {
  const d = admissionDeadline(5);
  // A port that stops at the signal and says why.
  const port = new Promise<never>((_, reject) => d.signal.addEventListener("abort", () => reject(new Error("the port's own reason")), { once: true }));
  const winner = await Promise.race([port, d.expired()]).catch((error: unknown) => error);
  assert.is((winner as Error).message, "the port's own reason");
  // Asked after the abort, it still rejects, with the deadline's reason.
  const late = await d.expired().catch((error: unknown) => error);
  assert.is(late, d.signal.reason);
});

deadline("every promise expired() hands out rejects", async () => {
  const d = admissionDeadline(5);
  const both = await Promise.all([d.expired().catch((e: unknown) => e), d.expired().catch((e: unknown) => e)]);
  assert.is(both[0], d.signal.reason);
  assert.is(both[1], d.signal.reason);
});

deadline.run();
