import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync, readdirSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** What the bench reads about a server process from /proc: its CPU time and resident memory. */
const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** User plus system CPU time of a process (all its threads), in milliseconds. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name may hold spaces; fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

export function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

/**
 * The descendant of `root` whose command line contains `marker` (npm, sh and any loader sit in
 * between); the deepest one when several match, which is the process that serves.
 */
export function descendantRunning(root: number, marker: string): number | undefined {
  let found: { pid: number; depth: number } | undefined;
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(marker)) continue;
      let depth = 0;
      for (let up = pid; up > 1; up = parentOf(up), depth++) {
        if (up === root && (!found || depth > found.depth)) found = { pid, depth };
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return found?.pid;
}

export interface Started {
  readonly child: ChildProcess;
  readonly output: string;
  /** The line that matched, and how long after spawning it appeared. */
  readonly line: string;
  readonly readyMs: number;
  stop(): Promise<void>;
}

/**
 * Spawns a server with its output going to a file, not a pipe, so that the bench process never
 * has to read the log lines a server writes under load; waits for a line matching `ready`.
 */
export async function startServer(command: string, args: string[], options: { env: NodeJS.ProcessEnv; output: string; ready: RegExp; timeoutMs?: number }): Promise<Started> {
  const fd = openSync(options.output, "w");
  const started = performance.now();
  const child = spawn(command, args, { env: options.env, stdio: ["ignore", fd, fd], detached: true });
  closeSync(fd);
  const deadline = started + (options.timeoutMs ?? 60_000);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    // The whole group: npm's children would otherwise outlive it.
    process.kill(-child.pid!, "SIGTERM");
    await Promise.race([exited, sleep(5000).then(() => process.kill(-child.pid!, "SIGKILL"))]);
  };
  for (;;) {
    const text = readFileSync(options.output, "utf8");
    const line = text.split("\n").find((l) => options.ready.test(l));
    if (line) return { child, output: options.output, line, readyMs: performance.now() - started, stop };
    if (child.exitCode !== null || performance.now() > deadline) {
      await stop();
      throw new Error(`${command} ${args.join(" ")} did not print ${options.ready}:\n${text.slice(-2000)}`);
    }
    await sleep(5);
  }
}
