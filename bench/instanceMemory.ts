import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The memory of one Function App instance, given to the processes the bench starts. Node sizes
 * V8's heap from the memory it is given (a cgroup's limit where there is one, else the machine's)
 * and V8 lets the heap grow further past each collection on a machine with more memory. An
 * instance has the memory its plan gives it (infra/main.bicep's `instanceMemoryMB`), not this
 * machine's: without the limit, the memory figures are those of a machine no instance runs on.
 *
 * A memory cgroup of that size, made inside the cgroup the bench itself runs in (cgroup v2, or
 * v1's memory hierarchy), so that whatever else limits the bench limits its processes too. Needs
 * the right to make cgroups there (root, as the bench runs on this project's machines);
 * `unavailable` says why not otherwise.
 */
export interface InstanceMemory {
  readonly mib: number;
  readonly dir: string;
  /** The command line that runs `argv` inside the cgroup: a shell moves itself in, then becomes `argv`. */
  command(argv: readonly string[]): string[];
  /** Removes the cgroup (empty by then); says why when it cannot. */
  remove(): string | undefined;
}

export function instanceMemory(mib: number, name = `gmsa-bench-${process.pid}-${randomBytes(4).toString("hex")}`): InstanceMemory | { unavailable: string } {
  if (!Number.isInteger(mib) || mib <= 0) throw new Error(`instance memory must be a positive number of MiB, not ${mib}`);
  const bytes = String(mib * 1024 * 1024);
  const reasons: string[] = [];
  for (const hierarchy of ownCgroups()) {
    const dir = join(hierarchy.dir, name);
    try {
      mkdirSync(dir);
    } catch (error) {
      reasons.push(`${dir}: ${(error as Error).message}`);
      continue;
    }
    const memory: InstanceMemory = {
      mib,
      dir,
      command: (argv) => ["sh", "-c", 'echo $$ > "$0" && exec "$@"', join(dir, "cgroup.procs"), ...argv],
      remove() {
        try {
          rmdirSync(dir);
          return undefined;
        } catch (error) {
          return `${dir} is left behind: ${(error as Error).message}`;
        }
      },
    };
    try {
      writeFileSync(join(dir, hierarchy.limitFile), bytes);
      const kept = readFileSync(join(dir, hierarchy.limitFile), "utf8").trim();
      if (kept !== bytes) throw new Error(`the limit reads back as ${kept}, not ${bytes}`);
      // What counts is what Node reads: a limit it does not see leaves V8 sizing its heap for the machine.
      const [command, ...args] = memory.command([process.execPath, "-e", "process.stdout.write(String(process.constrainedMemory()))"]);
      const seen = execFileSync(command!, args, { encoding: "utf8" });
      if (seen !== bytes) throw new Error(`Node in it reads ${seen} bytes as its limit, not ${bytes}`);
      return memory;
    } catch (error) {
      const left = memory.remove();
      reasons.push(`${dir}: ${(error as Error).message}${left ? `; ${left}` : ""}`);
    }
  }
  return { unavailable: reasons.length > 0 ? reasons.join("; ") : "no cgroup v2 or v1 memory hierarchy holds this process" };
}

/** Where a child cgroup with a memory limit can be made for this process: v2, then v1's memory hierarchy. */
function ownCgroups(): Array<{ dir: string; limitFile: string }> {
  const lines = readOr("/proc/self/cgroup").split("\n");
  const found: Array<{ dir: string; limitFile: string }> = [];
  const unified = lines.find((line) => line.startsWith("0::"));
  if (unified !== undefined && existsSync("/sys/fs/cgroup/cgroup.controllers")) {
    const dir = join("/sys/fs/cgroup", unified.slice(3));
    // A v2 cgroup's children get a memory limit only where it hands them the memory controller.
    if (readOr(join(dir, "cgroup.subtree_control")).split(/\s+/).includes("memory")) found.push({ dir, limitFile: "memory.max" });
  }
  const v1 = lines.find((line) => line.split(":")[1]?.split(",").includes("memory"));
  if (v1 !== undefined && existsSync("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    found.push({ dir: join("/sys/fs/cgroup/memory", v1.split(":").slice(2).join(":")), limitFile: "memory.limit_in_bytes" });
  }
  return found;
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
