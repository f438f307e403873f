import { execFileSync } from "node:child_process";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { instanceMemory } from "../../bench/instanceMemory.js";

// Where this machine lets no memory cgroup be made (not root, no controller), the bench warns and
// runs unlimited; so does this test, which says why it was skipped.
const probe = instanceMemory(64, `gmsa-test-probe-${process.pid}`);
if ("unavailable" in probe) console.log(`skipped: the instance memory tests (no memory cgroup can be made here: ${probe.unavailable})`);
else probe.remove();
const cgroupTest = "unavailable" in probe ? test.skip : test;

cgroupTest("a process moved into the instance's cgroup reads its memory as Node's limit, and sizes V8's heap from it", () => {
  const memory = instanceMemory(2048, `gmsa-test-${process.pid}`);
  if ("unavailable" in memory) throw new Error(memory.unavailable);
  try {
    const read = (inside: boolean) => {
      const script = 'const v8 = require("node:v8"); process.stdout.write(JSON.stringify([process.constrainedMemory(), v8.getHeapStatistics().heap_size_limit]))';
      const out = inside
        ? execFileSync("sh", ["-c", 'echo $$ > "$0" && exec "$@"', memory.procs, process.execPath, "-e", script], { encoding: "utf8" })
        : execFileSync(process.execPath, ["-e", script], { encoding: "utf8" });
      return JSON.parse(out) as [number, number];
    };
    const [limit, heap] = read(true);
    assert.is(limit, 2048 * 1024 * 1024);
    const [outsideLimit, outsideHeap] = read(false);
    assert.is.not(outsideLimit, limit);
    // V8 chose a heap for 2 GiB, not for whatever this machine has (unless it has no more).
    assert.ok(heap < 2048 * 1024 * 1024, `heap limit ${heap}`);
    assert.ok(heap <= outsideHeap, `heap limit ${heap} inside, ${outsideHeap} outside`);
  } finally {
    memory.remove();
  }
});

test("an instance memory that is no whole positive number of MiB is refused before anything is made", () => {
  for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => instanceMemory(bad), /positive number of MiB/);
});

test.run();
