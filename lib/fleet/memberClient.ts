import type { AuditFinding } from "../credspec/audit.js";
import type { ReadinessResult } from "../canary/probe.js";
import type { CredSpecCacheStatus } from "../kube/credSpecCache.js";
import { type CredSpecSource, type UseAuthorizer } from "../gmsa/ports.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";

/**
 * One fleet member's cluster client, started when an admission first needs it and stopped again
 * after a while without admissions. Its ports can be handed out before the client exists: the
 * first call starts it (concurrent first calls share one start), a start that fails is not kept
 * (the next call tries again), and a start that outlasts the admission's budget fails that
 * admission closed while it goes on for the next one. A start that never settles is abandoned
 * after `startTimeoutMs` (default 30 s), so the admissions after it start afresh instead of
 * joining it for ever; should it finish after all, what it built is stopped.
 */

/** What a started client offers: the ports, what its cache holds, and how to stop it. */
export interface MemberPorts {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  /** The canary's dry run through the member's API server (lib/canary); absent where a stand-in has none. */
  probe?(target: { readonly namespace: string; readonly serviceAccount: string }, signal: AbortSignal): Promise<ReadinessResult>;
  /** The credential spec audit with the member's identity (lib/kube/auditReads.ts); absent where a stand-in has none. */
  audit?(options: { readonly randomHostname: boolean; readonly signal: AbortSignal }): Promise<{ readonly findings: readonly AuditFinding[]; readonly apiCalls: number }>;
  cacheStatus(): CredSpecCacheStatus | undefined;
  stop(): Promise<void>;
}

export interface MemberTimers {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export interface MemberClientOptions {
  readonly name: string;
  readonly start: () => Promise<MemberPorts>;
  /** Stop after this long without an admission; unset: never (the single-cluster member). */
  readonly idleMs?: number;
  /** Give up on a start after this long. Default 30 s. */
  readonly startTimeoutMs?: number;
  readonly now?: () => number;
  readonly timers?: MemberTimers;
  readonly log: (level: "info" | "warn", message: string) => void;
}

export type MemberState = "idle" | "starting" | "started" | "stopped";

export interface MemberStatus {
  readonly state: MemberState;
  /** When the last admission for this member finished (ms since the epoch), if any did. */
  readonly lastAdmissionAt: number | undefined;
  readonly admissions: number;
  readonly starts: number;
  readonly credSpecCache: CredSpecCacheStatus | undefined;
}

export interface MemberClient {
  readonly name: string;
  /** Ports that start the client on first use. */
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  /** Starts the client (or joins the start under way) and resolves once it runs. */
  start(): Promise<MemberPorts>;
  /** An admission for this member begins: the client is not stopped as idle while any runs. */
  enter(): void;
  leave(): void;
  status(): MemberStatus;
  /** Stops it for good: the runtime it belongs to was replaced. */
  stop(): Promise<void>;
}

const realTimers: MemberTimers = {
  set: (run, ms) => setTimeout(run, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export function memberClient(options: MemberClientOptions): MemberClient {
  const now = options.now ?? Date.now;
  const timers = options.timers ?? realTimers;
  const { name, idleMs, log } = options;
  let state: MemberState = "idle";
  let ports: MemberPorts | undefined;
  let starting: Promise<MemberPorts> | undefined;
  let inFlight = 0;
  let admissions = 0;
  let starts = 0;
  let lastUsed = now();
  let lastAdmissionAt: number | undefined;
  let idleTimer: unknown;

  const armIdle = (ms: number) => {
    if (idleMs === undefined) return;
    idleTimer = timers.set(checkIdle, ms);
  };

  function checkIdle(): void {
    idleTimer = undefined;
    if (state !== "started" || idleMs === undefined) return;
    const quiet = now() - lastUsed;
    if (inFlight > 0 || quiet < idleMs) return armIdle(inFlight > 0 ? idleMs : idleMs - quiet);
    const stopping = ports;
    ports = undefined;
    state = "idle";
    log("info", `cluster "${name}": no admission for ${Math.round(quiet / 1000)} s, its watch is stopped and its caches freed until the next one`);
    void stopping?.stop().catch((error: unknown) => log("warn", `cluster "${name}": stopping its client failed: ${String(error)}`));
  }

  function start(): Promise<MemberPorts> {
    if (ports) return Promise.resolve(ports);
    if (starting) return starting;
    if (state === "stopped") return Promise.reject(new ClusterUnavailableError(`the client of cluster "${name}" was stopped`, "rejected"));
    state = "starting";
    starts += 1;
    const startTimeoutMs = options.startTimeoutMs ?? 30_000;
    const run = Promise.resolve().then(options.start);
    let giveUp!: (error: Error) => void;
    const abandoned = new Promise<never>((_, reject) => (giveUp = reject));
    const abandonTimer = timers.set(() => {
      giveUp(new ClusterUnavailableError(`the client of cluster "${name}" did not start within ${duration(startTimeoutMs)} and was given up`, "timeout"));
      log("warn", `cluster "${name}": its client did not start within ${duration(startTimeoutMs)}; the next admission starts it afresh`);
      // Should it finish after all, nobody is left to use it.
      run
        .then(
          (late) => late.stop(),
          () => {},
        )
        .catch(() => {});
    }, startTimeoutMs);
    const attempt: Promise<MemberPorts> = Promise.race([run, abandoned])
      .finally(() => timers.clear(abandonTimer))
      .then(
        async (started) => {
          if (starting !== attempt) {
            // Stopped for good while it started.
            await started.stop().catch(() => {});
            throw new ClusterUnavailableError(`the client of cluster "${name}" was stopped`, "rejected");
          }
          starting = undefined;
          ports = started;
          state = "started";
          lastUsed = now();
          armIdle(idleMs ?? 0);
          return started;
        },
        (error: unknown) => {
          if (starting === attempt) {
            starting = undefined;
            state = "idle";
          }
          if (error instanceof ClusterUnavailableError) throw error;
          const failure = new ClusterUnavailableError(`the client of cluster "${name}" could not start: ${error instanceof Error ? error.message : String(error)}`, "rejected");
          failure.cause = error;
          throw failure;
        },
      );
    starting = attempt;
    return attempt;
  }

  /** The started ports now, or once started within the admission's signal. */
  const ready = (signal: AbortSignal): MemberPorts | Promise<MemberPorts> => ports ?? withinSignal(start(), signal, name);

  return {
    name,
    credSpecs: {
      lookup(credSpec, call) {
        const now = ready(call.signal);
        return "then" in now ? now.then((p) => p.credSpecs.lookup(credSpec, call)) : now.credSpecs.lookup(credSpec, call);
      },
      knownNames: () => ports?.credSpecs.knownNames?.(),
    },
    authorizer: {
      mayUse(principal, namespace, credSpec, call) {
        const now = ready(call.signal);
        return "then" in now ? now.then((p) => p.authorizer.mayUse(principal, namespace, credSpec, call)) : now.authorizer.mayUse(principal, namespace, credSpec, call);
      },
    },
    start,
    enter() {
      inFlight += 1;
    },
    leave() {
      inFlight -= 1;
      admissions += 1;
      lastUsed = now();
      lastAdmissionAt = lastUsed;
    },
    status: () => ({ state, lastAdmissionAt, admissions, starts, credSpecCache: ports?.cacheStatus() }),
    async stop() {
      state = "stopped";
      timers.clear(idleTimer);
      idleTimer = undefined;
      starting = undefined;
      const stopping = ports;
      ports = undefined;
      await stopping?.stop();
    },
  };
}

/** "100 ms" under a second (rounding it would say "0 s"), else whole seconds. */
function duration(ms: number): string {
  return ms < 1_000 ? `${Math.round(ms)} ms` : `${Math.round(ms / 1_000)} s`;
}

function withinSignal(started: Promise<MemberPorts>, signal: AbortSignal, name: string): Promise<MemberPorts> {
  if (signal.aborted) return Promise.reject(new ClusterUnavailableError(`the client of cluster "${name}" did not start in time`, "timeout"));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new ClusterUnavailableError(`the client of cluster "${name}" did not start in time`, "timeout"));
    signal.addEventListener("abort", onAbort, { once: true });
    started.then(
      (p) => {
        signal.removeEventListener("abort", onAbort);
        resolve(p);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
