import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The memory of one Function App instance, given to the processes the bench starts. Node sizes
 * V8's heap from the memory it is given (a cgroup's limit where there is one, else the machine's)
 * and V8 lets the heap grow further past each collection on a machine with more memory. An
 * instance has the memory its plan gives it (infra/main.bicep's `instanceMemoryMB`), not this
 * machine's: without the limit, the memory figures are those of a machine no instance runs on.
 *
 * A memory cgroup of that size, cgroup v2 or v1, made under the hierarchy's root; a process is
 * put in it by writing its PID to `procs`. Needs the right to make cgroups (root, as the bench
 * runs on this project's machines); `unavailable` says why not otherwise.
 */
export interface InstanceMemory {
  readonly mib: number;
  /** The cgroup's process list: a PID written here moves that process in. */
  readonly procs: string;
  remove(): void;
}

export function instanceMemory(mib: number, name = `gmsa-bench-${process.pid}`): InstanceMemory | { unavailable: string } {
  if (!Number.isInteger(mib) || mib <= 0) throw new Error(`instance memory must be a positive number of MiB, not ${mib}`);
  const bytes = String(mib * 1024 * 1024);
  const tries: Array<{ root: string; limitFile: string; ready: () => boolean }> = [
    // v2: the memory controller must be enabled for the root's children.
    { root: "/sys/fs/cgroup", limitFile: "memory.max", ready: () => readOr("/sys/fs/cgroup/cgroup.subtree_control").split(/\s+/).includes("memory") },
    { root: "/sys/fs/cgroup/memory", limitFile: "memory.limit_in_bytes", ready: () => existsSync("/sys/fs/cgroup/memory/memory.limit_in_bytes") },
  ];
  const reasons: string[] = [];
  for (const { root, limitFile, ready } of tries) {
    if (!ready()) {
      reasons.push(`${root}: no memory controller there`);
      continue;
    }
    const dir = join(root, name);
    try {
      mkdirSync(dir);
    } catch (error) {
      reasons.push(`${dir}: ${(error as Error).message}`);
      continue;
    }
    const remove = () => {
      try {
        rmdirSync(dir);
      } catch {
        // A process still in it (one that outlived the bench) keeps it: nothing to undo here.
      }
    };
    try {
      writeFileSync(join(dir, limitFile), bytes);
      // The kernel rounds a v1 limit to whole pages: a MiB multiple is kept exactly.
      const kept = readFileSync(join(dir, limitFile), "utf8").trim();
      if (kept !== bytes) throw new Error(`the limit reads back as ${kept}, not ${bytes}`);
      return { mib, procs: join(dir, "cgroup.procs"), remove };
    } catch (error) {
      remove();
      reasons.push(`${dir}: ${(error as Error).message}`);
    }
  }
  return { unavailable: reasons.join("; ") };
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
