import type { TokenCredential } from "@azure/core-auth";
import { performance } from "node:perf_hooks";
import { fleetRouter, type FleetRouter } from "../fleet/fleetRouter.js";
import { memberClient, type MemberClient, type MemberClientOptions, type MemberPorts } from "../fleet/memberClient.js";
import { keptClusterAccess, loadClusterAccess, type ClusterLog, type ClusterPorts, type KeptClusterAccess, type SharedAccess } from "../kube/clusterClient.js";
import { type AdmissionSettings, type SharedAdmissionSettings } from "../settings/admission.js";
import {
  apiServerTarget,
  defaultMemberName,
  readFleetSettings,
  sameTargetProblem,
  type FleetMemberSettings,
  type FleetSettings,
  type UnavailableMember,
} from "../settings/fleet.js";

/**
 * What one instance of the app keeps between requests: its settings and one cluster client per
 * fleet member. Built once, at start-up in the Functions host (so bad settings stop it there) or
 * by the local host, which may hand in its own. The single-cluster settings make a fleet of one,
 * named "default", whose client starts with the instance as it always has; a fleet's members
 * start on their first admission and stop again when idle.
 */
export interface AdmissionRuntime {
  readonly mode: FleetSettings["mode"];
  /** What every member shares: the policy's settings and the bounds on API calls. */
  readonly settings: SharedAdmissionSettings;
  readonly members: ReadonlyMap<string, MemberClient>;
  /** Fleet members kept out of service by their own settings, and why (never a secret): answered 503, never started. */
  readonly unavailable: ReadonlyMap<string, string>;
  readonly router: FleetRouter<MemberClient>;
  readonly startedAt: number;
  stop(): Promise<void>;
}

export interface FleetRuntimeOptions {
  /** How a member's client is built; default: from its settings, with one credential shared by Entra members. */
  readonly startMember?: (member: FleetMemberSettings, log: ClusterLog) => Promise<MemberPorts>;
  readonly now?: () => number;
  readonly timers?: MemberClientOptions["timers"];
  readonly log?: ClusterLog;
}

let current: Promise<AdmissionRuntime> | undefined;
let served = 0;

const consoleLog: ClusterLog = (level, message) => (level === "warn" ? console.warn(message) : console.info(message));

/** The single-cluster runtime from its settings, its client started (or the one handed in). */
export async function createAdmissionRuntime(settings: AdmissionSettings, cluster?: ClusterPorts): Promise<AdmissionRuntime> {
  const { cluster: _access, ...shared } = settings;
  const fleet: FleetSettings = { mode: "single", shared, members: [{ name: defaultMemberName, settings, secrets: [] }], idleMs: 0 };
  return createFleetRuntime(fleet, cluster ? { startMember: async () => cluster } : {});
}

/**
 * A runtime for the settings' members. The single-cluster member is started here, so that a
 * broken cluster access stops start-up as before; a fleet's kubeconfig members are read here,
 * and nothing reaches any cluster until an admission for it arrives. A fleet member whose own
 * settings are wrong (as the settings found, or an unreadable kubeconfig or context here) is
 * kept out of service, with a warning line naming it and the problem, and the others serve.
 */
export async function createFleetRuntime(fleet: FleetSettings, options: FleetRuntimeOptions = {}): Promise<AdmissionRuntime> {
  const log = options.log ?? consoleLog;
  const unavailable: UnavailableMember[] = [...(fleet.unavailable ?? [])];
  let usable: readonly FleetMemberSettings[] = fleet.members;
  if (fleet.mode === "fleet") {
    const readable: FleetMemberSettings[] = [];
    // Where each member's API server is, as far as start-up knows: a kubeconfig member's from
    // the context it uses, an apiServerUrl member's from its URL.
    const servers = new Map<string, { kubeconfig: boolean; names: string[] }>();
    const reaches = (name: string, server: string, kubeconfig: boolean) => {
      const key = apiServerTarget(server);
      const entry = servers.get(key) ?? { kubeconfig: false, names: [] };
      servers.set(key, { kubeconfig: entry.kubeconfig || kubeconfig, names: [...entry.names, name] });
    };
    for (const member of fleet.members) {
      const cluster = member.settings.cluster;
      if (cluster.access === "entra") {
        if (cluster.server !== undefined) reaches(member.name, cluster.server, false);
        readable.push(member);
        continue;
      }
      try {
        // client-node is loaded for kubeconfig members only (lib/kube/localKubeConfig.ts).
        const { localKubeConfig } = await import("../kube/localKubeConfig.js");
        const server = localKubeConfig(cluster).getCurrentCluster()?.server;
        if (server !== undefined) reaches(member.name, server, true);
        readable.push(member);
      } catch (error) {
        // The first line only: a parser's message goes on to quote the file's lines, and a
        // kubeconfig holds tokens and keys; the reason reaches the log and /metrics.
        const message = (error instanceof Error ? error.message : String(error)).split("\n", 1)[0]!.trim();
        unavailable.push({ name: member.name, reason: `GMSA_CLUSTERS.${member.name}: ${message}`, secrets: member.secrets });
      }
    }
    // The settings compared the URLs they had; a kubeconfig's server is known only now.
    const twice = new Map<string, string>();
    for (const { kubeconfig, names } of servers.values()) {
      if (kubeconfig && names.length > 1) for (const name of names) twice.set(name, sameTargetProblem(names, "the API server of the kubeconfig context it uses"));
    }
    usable = readable.filter((member) => !twice.has(member.name));
    for (const member of readable) {
      const problem = twice.get(member.name);
      if (problem !== undefined) unavailable.push({ name: member.name, reason: problem, secrets: member.secrets });
    }
    for (const member of unavailable)
      log("warn", JSON.stringify({ event: "gmsa.clusterUnavailable", cluster: member.name, status: 503, reason: `cluster "${member.name}" is not served: ${member.reason}` }));
  }
  const startMember = options.startMember ?? defaultStart();
  const members = new Map<string, MemberClient>();
  for (const member of usable) {
    // Every line the client writes names its member.
    const memberLog: ClusterLog = fleet.mode === "fleet" ? (level, message) => log(level, ofMember(member.name, message)) : log;
    members.set(
      member.name,
      memberClient({
        name: member.name,
        start: () => startMember(member, memberLog),
        ...(fleet.mode === "fleet" ? { idleMs: fleet.idleMs } : {}),
        ...(options.now ? { now: options.now } : {}),
        ...(options.timers ? { timers: options.timers } : {}),
        log,
      }),
    );
  }
  const stop = async () => void (await Promise.all([...members.values()].map((m) => m.stop())));
  if (fleet.mode === "single") {
    try {
      await members.get(defaultMemberName)!.start();
    } catch (error) {
      await stop();
      // The cause as it was: the message names the setting at fault.
      throw error instanceof Error && error.cause instanceof Error ? error.cause : error;
    }
  }
  return {
    mode: fleet.mode,
    settings: fleet.shared,
    members,
    unavailable: new Map(unavailable.map((m) => [m.name, m.reason])),
    router: fleetRouter(fleet.mode, [
      ...usable.map((m) => ({ name: m.name, secrets: m.secrets, member: members.get(m.name)! })),
      ...unavailable.map((m) => ({ name: m.name, secrets: m.secrets, unavailable: m.reason })),
    ]),
    startedAt: performance.now(),
    stop,
  };
}

/**
 * Builds members' clients from their settings; Entra members share one credential per identity.
 * Each member's access (for Entra: endpoint, CA, tokens) is read on its first start and kept, so
 * a member that idled starts again without asking ARM.
 */
/**
 * A member's line: a structured one (a JSON object, written for "default") names the member in
 * its cluster field; any other is prefixed with the member's name.
 */
export function ofMember(name: string, message: string): string {
  if (message.startsWith("{")) {
    try {
      const line = JSON.parse(message) as unknown;
      if (typeof line === "object" && line !== null && !Array.isArray(line) && "cluster" in line) return JSON.stringify({ ...line, cluster: name });
    } catch {
      // Not JSON after all: said in words below.
    }
  }
  return `cluster "${name}": ${message}`;
}

function defaultStart(): (member: FleetMemberSettings, log: ClusterLog) => Promise<MemberPorts> {
  const credentials = new Map<string, TokenCredential>();
  const accesses = new Map<string, KeptClusterAccess>();
  let azureCredential: ((clientId?: string) => TokenCredential) | undefined;
  const shared: SharedAccess = {
    credential: (clientId) => {
      const key = clientId ?? "";
      let credential = credentials.get(key);
      if (!credential) {
        credential = azureCredential!(clientId);
        credentials.set(key, credential);
      }
      return credential;
    },
  };
  return async (member, log) => {
    if (member.settings.cluster.access === "entra") azureCredential ??= (await import("../kube/entraAccess.js")).azureCredential;
    let access = accesses.get(member.name);
    if (!access) {
      access = keptClusterAccess(() => loadClusterAccess(member.settings.cluster, log, shared), member.settings, log);
      accesses.set(member.name, access);
    }
    return access.start();
  };
}

/**
 * The one place that decides, for both hosts, whether the environment names a single cluster or a
 * fleet (GMSA_CLUSTERS): a single cluster is served as a fleet of one.
 */
export async function runtimeFromEnvironment(env: NodeJS.ProcessEnv = process.env): Promise<{ runtime: AdmissionRuntime; fleet: FleetSettings }> {
  const fleet = readFleetSettings(env);
  return { runtime: await createFleetRuntime(fleet), fleet };
}

/**
 * This instance's runtime, built on first use from the environment. A failure is not kept: the
 * next call tries again (the Functions host reports the first one at start).
 */
export function admissionRuntime(): Promise<AdmissionRuntime> {
  if (!current) {
    const building = Promise.resolve()
      .then(async () => (await runtimeFromEnvironment()).runtime)
      .catch((error: unknown) => {
        if (current === building) current = undefined;
        throw error;
      });
    current = building;
  }
  return current;
}

/** Hands this instance a runtime; the one it replaces stops its members' clients. */
export function useAdmissionRuntime(runtime: AdmissionRuntime): void {
  const previous = current;
  current = Promise.resolve(runtime);
  served = 0;
  void previous?.then((old) => (old !== runtime ? old.stop() : undefined)).catch(() => {});
}

export async function stopAdmissionRuntime(): Promise<void> {
  const previous = current;
  current = undefined;
  await (await previous?.catch(() => undefined))?.stop();
}

/** True for the first admission an instance serves: a cold start the API server waited for. */
export function takeColdStart(): boolean {
  return served++ === 0;
}
