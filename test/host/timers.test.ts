import type { InvocationContext, Timer } from "@azure/functions";
import { setTimeout as sleep } from "node:timers/promises";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { runTimers } from "../../host/functionsHost.js";

/** The local host runs the app's timers as the Functions host does: on schedule, one run at a time. */
const Timers = suite("the local host's timers");

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

Timers("a timer runs on its schedule with a Timer and a context whose lines reach the log, until stopped", async () => {
  const seen: Timer[] = [];
  const lines: string[] = [];
  const running = runTimers(
    [
      {
        name: "tick",
        schedule: "* * * * * *",
        handler: async (timer: Timer, context: InvocationContext) => {
          seen.push(timer);
          context.info(`run ${seen.length} of ${context.functionName}`);
        },
      },
    ],
    (level, message) => lines.push(`${level} ${message}`),
  );
  try {
    await until(() => seen.length >= 2, 5000);
  } finally {
    running.stop();
  }
  assert.is(seen[0]!.isPastDue, false);
  assert.equal(lines.slice(0, 2), ["information run 1 of tick", "information run 2 of tick"]);
  const after = seen.length;
  await sleep(1500);
  assert.is(seen.length, after, "no run after stop");
});

Timers("a run that throws is logged and the schedule goes on; a run still going when the next is due skips it", async () => {
  let runs = 0;
  let inFlight = 0;
  let most = 0;
  const lines: string[] = [];
  const running = runTimers(
    [
      {
        name: "slow",
        schedule: "* * * * * *",
        handler: async () => {
          runs += 1;
          inFlight += 1;
          most = Math.max(most, inFlight);
          await sleep(1500);
          inFlight -= 1;
          throw new Error(`run ${runs} broke`);
        },
      },
    ],
    (level, message) => lines.push(`${level} ${message}`),
  );
  try {
    await until(() => lines.length >= 2, 8000);
  } finally {
    running.stop();
  }
  assert.is(most, 1, "never two runs at once");
  assert.match(lines[0]!, /^error the slow timer failed: run 1 broke$/);
  assert.match(lines[1]!, /^error the slow timer failed: run \d broke$/);
});

Timers.run();
