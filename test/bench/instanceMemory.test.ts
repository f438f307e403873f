import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { totalmem } from "node:os";
import { dirname, join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { instanceMemory } from "../../bench/instanceMemory.js";

// Where this machine lets no memory cgroup be made (not root, no controller), the bench warns and
// runs unlimited; so does this test, which says why it was skipped.
const probe = instanceMemory(64);
if ("unavailable" in probe) console.log(`skipped: the instance memory tests (no memory cgroup can be made here: ${probe.unavailable})`);
else probe.remove();
const cgroupTest = "unavailable" in probe ? test.skip : test;

const gib2 = 2048 * 1024 * 1024;
const readLimits = 'process.stdout.write(JSON.stringify([process.constrainedMemory(), require("node:v8").getHeapStatistics().heap_size_limit]))';

cgroupTest("a command run in the instance's cgroup reads its memory as Node's limit, sizes V8's heap from it, and the cgroup goes when removed", () => {
  const memory = instanceMemory(2048);
  if ("unavailable" in memory) throw new Error(memory.unavailable);
  let removed: string | undefined = "not removed";
  try {
    const [command, ...args] = memory.command([process.execPath, "-e", readLimits]);
    const [limit, heap] = JSON.parse(execFileSync(command!, args, { encoding: "utf8" })) as [number, number];
    assert.is(limit, gib2);
    // It was made inside this process's own cgroup (v2, or v1's memory hierarchy), not beside it.
    const own = readFileSync("/proc/self/cgroup", "utf8").split("\n");
    const v2 = own.find((line) => line.startsWith("0::"))?.slice(3);
    const v1 = own
      .find((line) => line.split(":")[1]?.split(",").includes("memory"))
      ?.split(":")
      .slice(2)
      .join(":");
    const parents = [v2 === undefined ? undefined : join("/sys/fs/cgroup", v2), v1 === undefined ? undefined : join("/sys/fs/cgroup/memory", v1)];
    assert.ok(parents.includes(dirname(memory.dir)), `${memory.dir} is not inside this process's cgroup (${parents.join(", ")})`);
    const [outsideLimit, outsideHeap] = JSON.parse(execFileSync(process.execPath, ["-e", readLimits], { encoding: "utf8" })) as [number, number];
    // V8 chose a smaller heap for 2 GiB than for this machine, where this machine has more.
    if (totalmem() > 2 * gib2 && outsideLimit > 2 * gib2) assert.ok(heap < outsideHeap, `heap limit ${heap} inside, ${outsideHeap} outside`);
  } finally {
    removed = memory.remove();
  }
  assert.is(removed, undefined);
  assert.not.ok(existsSync(memory.dir), `${memory.dir} is still there`);
  assert.not.ok(existsSync(join(memory.dir, "cgroup.procs")));
});

test("an instance memory that is no whole positive number of MiB is refused before anything is made", () => {
  for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => instanceMemory(bad), /positive number of MiB/);
});

test.run();
