import type { TokenCredential } from "@azure/core-auth";
import { randomBytes } from "node:crypto";
import { caBundleDaysLeft, mutatingWebhookConfigurationPath } from "../canary/webhookCa.js";
import { auditOverConnection, type AuditOptions, type ClusterAudit } from "./auditReads.js";
import { classifyCanary, readinessPod, unknownCredSpecName, type ReadinessResult } from "../canary/probe.js";
import { notFoundMemory, rememberingNotFound } from "../caching/notFoundMemory.js";
import { useDecisionCache } from "../caching/useDecisionCache.js";
import type { CredSpecSource, UseAuthorizer } from "../gmsa/ports.js";
import type { ClusterAccessSettings, ClusterClientSettings } from "./clusterAccess.js";
import type { ApiCallOptions } from "./apiCall.js";
import { apiServerConnection, type ApiServerConnection, type ApiServerCredentials } from "./apiServerConnection.js";
import { apiSlots, memberShare } from "./apiSlots.js";
import { credSpecApi } from "./credSpecApi.js";
import { cacheStateLevel, cacheStateLine } from "../observability/cacheEvents.js";
import { credSpecCache, type CredSpecCacheStatus } from "./credSpecCache.js";
import { entraApiAccess, type EntraApiAccess } from "./entraApiAccess.js";
import { EntraTokenError } from "./entraTokenError.js";
import { useAuthorization } from "./useAuthorization.js";

/** The cluster-facing half of the product: the two ports, bound to one API server. */
export interface ClusterPorts {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly server: string;
  /**
   * The canary (lib/canary): a server-side dry run of a pod naming a credential spec nobody may
   * use, asked with this client's identity, read as a hop of the path that works or fails.
   */
  probe(target: { readonly namespace: string; readonly serviceAccount: string }, signal: AbortSignal): Promise<ReadinessResult>;
  /** The credential spec audit (lib/kube/auditReads.ts), with this client's identity. */
  audit?(options: AuditOptions): Promise<ClusterAudit>;
  cacheStatus(): CredSpecCacheStatus | undefined;
  stop(): Promise<void>;
}

export type ClusterLog = (level: "info" | "warn", message: string) => void;

const consoleLog: ClusterLog = (level, message) => (level === "warn" ? console.warn(message) : console.info(message));

/**
 * Reaches the API server the settings name: a kubeconfig, the pod's own service account, or a
 * managed cluster through Microsoft Entra ID with the app's managed identity.
 */
export async function loadClusterAccess(cluster: ClusterAccessSettings, log: ClusterLog = consoleLog, shared: SharedAccess = {}): Promise<ApiServerCredentials> {
  if (cluster.access === "entra") {
    // Loaded only here: the Azure identity and ARM code is most of what an instance would
    // otherwise load at start, and a kubeconfig or in-cluster instance never runs it.
    const { azureCredential } = await import("./entraAccess.js");
    return entraApiAccess({
      credential: shared.credential?.(cluster.clientId) ?? azureCredential(cluster.clientId),
      ...(cluster.resourceId ? { resourceId: cluster.resourceId } : {}),
      ...(cluster.server ? { server: cluster.server } : {}),
      ...(cluster.caPem ? { caPem: cluster.caPem } : {}),
      ...(cluster.armEndpoint ? { armEndpoint: cluster.armEndpoint } : {}),
      log,
    });
  }
  // client-node, for the kubeconfig, loaded only here: an Entra instance never needs it.
  const { localKubeConfig } = await import("./localKubeConfig.js");
  return localKubeConfig(cluster);
}

/** What the members of a fleet share: one managed identity signs them all in. */
export interface SharedAccess {
  readonly credential?: (clientId: string | undefined) => TokenCredential;
}

export async function clusterPorts(settings: ClusterClientSettings, log: ClusterLog = consoleLog, shared: SharedAccess = {}): Promise<ClusterPorts> {
  return portsFor(await loadClusterAccess(settings.cluster, log, shared), settings, log);
}

function isEntra(config: ApiServerCredentials): config is EntraApiAccess {
  return typeof (config as Partial<EntraApiAccess>).invalidateToken === "function";
}

// Without a watch to clear it, "not found" is believed only briefly: a spec created a moment ago must be accepted.
const unwatchedNotFoundTtlMs = 1_000;

/**
 * The ports over one cluster's access: direct reads behind the credential spec cache, answers behind
 * the decision cache, every call over one pool of kept-alive connections and within one cap on
 * calls in flight.
 */
export function portsFor(config: ApiServerCredentials, settings: ClusterClientSettings, log: ClusterLog = consoleLog): ClusterPorts {
  return portsOver(config, apiServerConnection(config, { timeoutMs: settings.apiTimeoutMs }), settings, log);
}

/** What a cluster client keeps across its starts: how the cluster is reached. */
export interface KeptClusterAccess {
  /**
   * New ports (cache, slots, decision cache) over the kept access, read on the first start only.
   * Called by one member client, which runs one start at a time: a start called while a read is
   * still under way comes after that start was given up, and reads afresh.
   */
  start(): Promise<ClusterPorts>;
}

/**
 * A cluster's access (its kubeconfig, or for Entra the endpoint and CA read through ARM and the
 * token cache) read once and kept, so that a client stopped as idle starts again without asking
 * ARM or the identity anew: an ARM outage then fails no member that was already reached. Only
 * what a start builds (the watch, the caches, the slots, the open connections) is freed by its
 * ports' stop. Only a read that succeeded is kept: one that fails is not (the next start reads
 * again), and one still under way is not joined by a later start, since that start comes after
 * the member gave the earlier one up (a read that hangs would otherwise be joined for ever).
 * Should a given-up read answer after all, it is dropped unused (no pool is opened over it): only
 * the latest read may be kept.
 */
export function keptClusterAccess(load: () => Promise<ApiServerCredentials>, settings: ClusterClientSettings, log: ClusterLog = consoleLog): KeptClusterAccess {
  let kept: { config: ApiServerCredentials; connection: ApiServerConnection } | undefined;
  let reads = 0;
  return {
    async start() {
      if (!kept) {
        const read = ++reads;
        const config = await load();
        if (read !== reads || kept) throw new Error("the cluster's access was read too late: a newer start read it again");
        kept = { config, connection: apiServerConnection(config, { timeoutMs: settings.apiTimeoutMs }) };
      }
      return portsOver(kept.config, kept.connection, settings, log);
    },
  };
}

/** How long the canary's dry run may take: the API server waits on the webhooks, up to 30 s each. */
const probeTimeoutMs = 45_000;

async function probeCluster(
  connection: ApiServerConnection,
  target: { readonly namespace: string; readonly serviceAccount: string },
  signal: AbortSignal,
): Promise<ReadinessResult> {
  const credSpec = unknownCredSpecName(randomBytes(6).toString("hex"));
  try {
    const reply = await connection.send({
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods?dryRun=All&fieldManager=gmsa-admission-canary`,
      body: readinessPod(target.namespace, target.serviceAccount, credSpec),
      signal: AbortSignal.any([signal, AbortSignal.timeout(probeTimeoutMs)]),
      timeoutMs: probeTimeoutMs,
    });
    const result = classifyCanary(reply, credSpec);
    const caBundleDaysLeft = await webhookCaDaysLeft(connection, signal);
    return caBundleDaysLeft === undefined ? result : { ...result, caBundleDaysLeft };
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    if (error instanceof EntraTokenError) return { hop: "functionIdentity", summary: "the function got no token for the API server for its canary", detail };
    return { hop: "functionToApiServer", summary: "the function could not reach the API server for its canary", detail };
  }
}

/** The days left on the webhooks' CA bundle, read from the product's own configuration; undefined when it cannot be read. */
async function webhookCaDaysLeft(connection: ApiServerConnection, signal: AbortSignal): Promise<number | undefined> {
  try {
    const reply = await connection.send({
      method: "GET",
      path: mutatingWebhookConfigurationPath,
      signal: AbortSignal.any([signal, AbortSignal.timeout(10_000)]),
      timeoutMs: 10_000,
    });
    return reply.status === 200 ? caBundleDaysLeft(reply.body) : undefined;
  } catch {
    return undefined;
  }
}

function portsOver(config: ApiServerCredentials, connection: ApiServerConnection, settings: ClusterClientSettings, log: ClusterLog): ClusterPorts {
  const entra = isEntra(config) ? config : undefined;
  const slots = apiSlots(settings.apiConcurrency, settings.apiMaxWaiting, { maxHeldAtAll: memberShare(settings.instanceConcurrency) });
  const bounds: ApiCallOptions = {
    timeoutMs: settings.apiTimeoutMs,
    budgetMs: settings.admissionBudgetMs,
    slots,
    ...(entra
      ? {
          onUnauthorized: () => entra.invalidateToken(),
          // A rotated CA shows as a failed connection: re-read it (ARM is asked at most every 30 s).
          onUnreachable: () => void entra.refreshClusterCredentials().catch((error: unknown) => log("warn", `re-reading the cluster's address and CA failed: ${String(error)}`)),
        }
      : {}),
  };
  const direct = credSpecApi(connection, bounds);
  const cache = settings.credSpecCache
    ? credSpecCache(connection, {
        direct,
        log,
        // A fleet's runtime names the member in the line (lib/app/runtime.ts); a single cluster is "default".
        onState: (event) => log(cacheStateLevel(event.state), cacheStateLine("default", event)),
        maxSpecs: settings.credSpecCacheMaxSpecs,
        maxBytes: settings.credSpecCacheMaxBytes,
        ...(entra ? { onUnauthorized: () => entra.invalidateToken() } : {}),
      })
    : undefined;
  return {
    credSpecs: cache ?? rememberingNotFound(direct, notFoundMemory(), () => unwatchedNotFoundTtlMs),
    authorizer: useDecisionCache(useAuthorization(connection, bounds), {
      ttlMs: settings.authCacheTtlMs,
      hold: (call) => slots.hold(call),
      aheadBudgetMs: settings.admissionBudgetMs,
    }),
    server: config.getCurrentCluster()?.server ?? "",
    probe: (target, signal) => probeCluster(connection, target, signal),
    // The audit keeps the specs within the cache's bound (0, no cache room, leaves its default).
    audit: (options) => auditOverConnection(connection, { ...(settings.credSpecCacheMaxBytes > 0 ? { maxKeptBytes: settings.credSpecCacheMaxBytes } : {}), ...options }),
    cacheStatus: () => cache?.status(),
    stop: async () => {
      await cache?.stop();
      // The pools only: the next call over the connection opens new ones.
      await connection.close();
    },
  };
}
