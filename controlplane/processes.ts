import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";

/**
 * The control plane's child processes: killed with the parent (pdeathsig via setpriv where
 * available, plus exit and signal handlers), each logging to a file in the data dir; and the small
 * waits the components' start-ups share.
 */

const STOP_GRACE_MS = 5000;
export const LOG_TAIL_LINES = 30;

export class ManagedProcess {
  readonly exited: Promise<void>;
  exitDescription: string | undefined;

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly logPath: string,
  ) {
    this.exited = new Promise<void>((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitDescription = signal ? `killed by ${signal}` : `exited with code ${code}`;
        live.delete(this);
        resolve();
      });
    });
  }

  static start(name: string, binary: string, args: string[], logPath: string): ManagedProcess {
    const fd = openSync(logPath, "a");
    let child: ChildProcess;
    try {
      // setpriv --pdeathsig: the kernel sends SIGKILL to the child if this
      // process dies without running its exit handlers (e.g. it was SIGKILLed).
      const [cmd, cmdArgs] = SETPRIV ? [SETPRIV, ["--pdeathsig", "KILL", "--", binary, ...args]] : [binary, args];
      child = spawn(cmd, cmdArgs, { stdio: ["ignore", fd, fd], detached: false });
    } finally {
      closeSync(fd);
    }
    const proc = new ManagedProcess(name, child, logPath);
    if (child.pid === undefined) {
      // spawn failed (ENOENT...); 'error' follows asynchronously.
      child.once("error", (err) => {
        proc.exitDescription = `failed to start: ${err.message}`;
      });
    } else {
      live.add(proc);
    }
    child.on("error", () => undefined);
    return proc;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  logTail(lines = LOG_TAIL_LINES): string {
    try {
      const text = readFileSync(this.logPath, "utf8").trimEnd().split("\n");
      return text.slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  failure(message: string): Error {
    const state = this.running ? "still running" : (this.exitDescription ?? "exited");
    return new Error(`${this.name}: ${message} (${state}); last ${LOG_TAIL_LINES} lines of ${this.logPath}:\n${this.logTail()}`);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = STOP_GRACE_MS): Promise<"not-running" | "terminated" | "killed"> {
    if (!this.running) return "not-running";
    this.child.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), graceMs);
    });
    const outcome = await Promise.race([this.exited.then(() => "exited" as const), timeout]);
    clearTimeout(timer);
    if (outcome === "exited") return "terminated";
    this.child.kill("SIGKILL");
    await this.exited;
    return "killed";
  }
}

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const live = new Set<ManagedProcess>();
/** Temp data dirs of running control planes, removed if this process exits without stop(). */
export const ownedTempDirs = new Set<string>();
let handlersInstalled = false;

function killAllNow(): void {
  for (const proc of live) {
    try {
      proc.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const dir of ownedTempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // removed at the next start (removeStaleTempDirs)
    }
  }
  ownedTempDirs.clear();
}

export function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", killAllNow);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = (): void => {
      killAllNow();
      // If nobody else handles the signal, keep its default effect (exit).
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, handler);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, handler);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Distinct free loopback ports (all held open at once, then released). */
export async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
      });
      const addr = server.address();
      if (addr === null || typeof addr === "string") throw new Error("no port");
      ports.push(addr.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

export interface HttpResult {
  status: number;
  body: string;
}

export function request(url: string, tls?: https.RequestOptions): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith("https:") ? https : http;
    const req = mod.get(url, { ...tls, agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/** Polls `check` until it returns true; fails early if `proc` exits. */
export async function waitFor(proc: ManagedProcess, what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  for (;;) {
    if (!proc.running) throw proc.failure(`exited while waiting for ${what}`);
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw proc.failure(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (${lastError})` : ""}`);
    }
    await delay(200);
  }
}
