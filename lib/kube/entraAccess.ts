import type { TokenCredential } from "@azure/core-auth";
import { DefaultAzureCredential } from "@azure/identity";
import { KubeConfig, type Cluster } from "@kubernetes/client-node";
import { checkAksApiServer, isLoopbackOrigin } from "./aksApiServerHost.js";
import { aksArmApiVersion, armEndpointOrigin, defaultArmEndpoint, fetchAksEndpoint, fetchManagedClusterHostNames, type ArmFetch, type AksEndpointRequest } from "./aksClusterEndpoint.js";
import { parseAksResourceId } from "./aksResourceId.js";
import { apiServerUrl, caBundlePem, type ApiServerEndpoint } from "./apiServerEndpoint.js";
import { entraTokenCache, type EntraTokenCache, type EntraTokenStatus } from "./entraTokenCache.js";
import { managedIdentityCredential } from "./refreshableCredential.js";

/**
 * The third way to reach the API server, beside a kubeconfig file and in-cluster: a managed
 * (AKS) cluster whose API server accepts Microsoft Entra tokens, reached with the Function
 * App's managed identity. Nothing is read from or written to disk and no kubelogin is needed.
 */

/** The scope of the AKS server application: the same for every AKS cluster with Entra integration. */
export const aksServerScope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default";

export interface EntraClusterOptions {
  /**
   * A managed identity or DefaultAzureCredential in production (see azureCredential), a fake in
   * tests. A RefreshableCredential lets a refused token be replaced by one past its cache.
   */
  readonly credential: TokenCredential;
  /** /subscriptions/…/resourceGroups/…/providers/Microsoft.ContainerService/managedClusters/<name>: URL and CA come from ARM. */
  readonly resourceId?: string;
  /** The API server URL, given directly instead of resourceId (https only). */
  readonly server?: string;
  /** With `server`: the CA bundle, PEM or base64 of PEM. Without it the system's roots are trusted. */
  readonly caPem?: string;
  /** Default https://management.azure.com; another cloud's ARM (or a test's). */
  readonly armEndpoint?: string;
  /** How ARM is called; default global fetch. */
  readonly armFetch?: ArmFetch;
  readonly armApiVersion?: string;
  /** Default 15 s per ARM call. */
  readonly armTimeoutMs?: number;
  /** Default 500 ms before the second of three attempts at a transient ARM failure. */
  readonly armRetryDelayMs?: number;
  /** refreshClusterCredentials() reads ARM at most this often. Default 30 s. */
  readonly minRefreshIntervalMs?: number;
  /** Renew a token this long before expiry when the credential gives no refresh time. Default 5 min. */
  readonly refreshMarginMs?: number;
  /** The longest one call to the credential for an AKS token may take, whether or not it heeds its signal. Default 10 s. */
  readonly tokenTimeoutMs?: number;
  /** Fetch the first AKS token before returning, so a broken identity fails at start. Default true. */
  readonly prefetchToken?: boolean;
  readonly now?: () => number;
  readonly log?: (level: "info" | "warn", message: string) => void;
  /**
   * For the product's own tests, whose API server and fake ARM run on loopback: lets ARM name
   * a loopback API server (it must still be a host the cluster resource declares). Refused
   * unless the ARM endpoint is itself on loopback; no setting reaches it.
   */
  readonly loopbackApiServerForTests?: boolean;
}

export class EntraAccessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EntraAccessError";
  }
}

export type ClusterCredentialsRefresh =
  | { readonly outcome: "skipped"; readonly reason: string }
  | { readonly outcome: "unchanged" }
  | { readonly outcome: "updated"; readonly serverChanged: boolean; readonly caChanged: boolean };

interface EntraKubeConfigParts {
  readonly endpoint: ApiServerEndpoint;
  readonly tokens: EntraTokenCache;
  /** Present when the endpoint came from ARM and can be read again. */
  readonly reread: (() => Promise<ApiServerEndpoint>) | undefined;
  readonly resourceId: string | undefined;
  readonly now: () => number;
  readonly minRefreshIntervalMs: number;
}

const entraUserName = "entra-managed-identity";

/**
 * A KubeConfig whose every request carries `Authorization: Bearer <Entra token>`: clients from
 * makeApiClient, Watch and informers, and websocket calls alike, because the token is applied
 * by an authenticator that client-node consults on all of those paths. Made by entraKubeConfig().
 */
export class EntraKubeConfig extends KubeConfig {
  readonly resourceId: string | undefined;
  readonly #tokens: EntraTokenCache;
  readonly #reread: (() => Promise<ApiServerEndpoint>) | undefined;
  readonly #now: () => number;
  readonly #minRefreshIntervalMs: number;
  #endpoint: ApiServerEndpoint;
  #generation = 0;
  #lastRead: number;
  #refreshing: Promise<ClusterCredentialsRefresh> | undefined;

  constructor(parts: EntraKubeConfigParts) {
    super();
    this.resourceId = parts.resourceId;
    this.#tokens = parts.tokens;
    this.#reread = parts.reread;
    this.#now = parts.now;
    this.#minRefreshIntervalMs = parts.minRefreshIntervalMs;
    this.#endpoint = parts.endpoint;
    this.#lastRead = parts.now();
    const tokens = parts.tokens;
    const authenticator: Parameters<KubeConfig["addAuthenticator"]>[0] = {
      isAuthProvider: (user) => user.name === entraUserName,
      applyAuthentication: async (_user, options) => {
        const headers = options.headers ?? {};
        headers.Authorization = `Bearer ${await tokens.token()}`;
        options.headers = headers;
      },
    };
    this.addAuthenticator(authenticator);
    this.#install(parts.endpoint);
  }

  /** The API server URL in use. */
  get server(): string {
    return this.#endpoint.server;
  }

  /** Forget the cached token: call it when the API server answers 401, then retry once. The retry gets a token from past the credential's cache. */
  invalidateToken(): void {
    this.#tokens.invalidate();
  }

  tokenStatus(): EntraTokenStatus {
    return this.#tokens.status();
  }

  /**
   * Reads the API server URL and CA from ARM again (after a CA rotation, say): call it when
   * connections fail. At most once per interval; concurrent calls share one read. A new CA
   * takes effect for the next request. A new server URL takes effect for Watch, informers and
   * clients made afterwards; clients already made keep the URL they were made with. A re-read
   * that names a host the cluster does not declare fails like any other: the endpoint stays.
   */
  async refreshClusterCredentials(): Promise<ClusterCredentialsRefresh> {
    const reread = this.#reread;
    if (!reread) return { outcome: "skipped", reason: "the API server was given directly, not through a resource ID: there is nothing to re-read" };
    if (this.#refreshing) return this.#refreshing;
    const sinceLast = this.#now() - this.#lastRead;
    if (sinceLast < this.#minRefreshIntervalMs) {
      return { outcome: "skipped", reason: `read ${Math.round(sinceLast / 1000)} s ago; read at most once every ${Math.round(this.#minRefreshIntervalMs / 1000)} s` };
    }
    this.#lastRead = this.#now();
    const refreshing = (async (): Promise<ClusterCredentialsRefresh> => {
      const next = await reread();
      const serverChanged = next.server !== this.#endpoint.server;
      const caChanged = next.caPem !== this.#endpoint.caPem;
      if (!serverChanged && !caChanged) return { outcome: "unchanged" };
      this.#install(next);
      return { outcome: "updated", serverChanged, caChanged };
    })();
    this.#refreshing = refreshing;
    try {
      return await refreshing;
    } finally {
      this.#refreshing = undefined;
    }
  }

  #install(endpoint: ApiServerEndpoint): void {
    this.#endpoint = endpoint;
    // A new name for every endpoint: client-node keeps an agent per cluster name, and an agent
    // made with the old CA must not be reused.
    this.#generation += 1;
    const cluster: Cluster = {
      name: `aks-${this.#generation}`,
      server: endpoint.server,
      caData: endpoint.caPem === undefined ? undefined : Buffer.from(endpoint.caPem).toString("base64"),
      skipTLSVerify: false,
    };
    this.loadFromClusterAndUser(cluster, { name: entraUserName });
  }
}

/** Builds the KubeConfig, reading the API server's URL and CA from ARM when given a resource ID. */
export async function entraKubeConfig(options: EntraClusterOptions): Promise<EntraKubeConfig> {
  const resourceId = nonEmpty(options.resourceId);
  const server = nonEmpty(options.server);
  if (resourceId && server) throw new EntraAccessError("give the managed cluster's resource ID or its API server URL, not both");
  if (!resourceId && !server) throw new EntraAccessError("give the managed cluster's resource ID, or its API server URL and CA");
  if (resourceId && nonEmpty(options.caPem)) throw new EntraAccessError("a CA goes with an API server URL; with a resource ID the CA is read from Azure Resource Manager");
  const now = options.now ?? Date.now;
  const log = options.log;

  let reread: (() => Promise<ApiServerEndpoint>) | undefined;
  let endpoint: ApiServerEndpoint;
  let id: string | undefined;
  if (resourceId) {
    const parsed = parseAksResourceId(resourceId);
    const armEndpoint = armEndpointOrigin(options.armEndpoint ?? defaultArmEndpoint);
    id = parsed.id;
    if (options.loopbackApiServerForTests && !isLoopbackOrigin(armEndpoint)) {
      throw new EntraAccessError("a loopback API server is accepted only from a test's ARM endpoint on loopback");
    }
    const request: AksEndpointRequest = {
      resourceId: parsed,
      credential: options.credential,
      armEndpoint,
      apiVersion: options.armApiVersion ?? aksArmApiVersion,
      ...(options.armFetch ? { fetch: options.armFetch } : {}),
      ...(options.armTimeoutMs !== undefined ? { timeoutMs: options.armTimeoutMs } : {}),
      ...(options.armRetryDelayMs !== undefined ? { retryDelayMs: options.armRetryDelayMs } : {}),
    };
    const loopbackForTests = options.loopbackApiServerForTests === true;
    reread = async () => {
      // What the cluster resource says its names are, then where the kubeconfig points: the
      // token goes only where both agree.
      const clusterHostNames = await fetchManagedClusterHostNames(request);
      const fetched = await fetchAksEndpoint(request);
      checkAksApiServer(fetched.server, { clusterHostNames, loopbackForTests }, `listClusterUserCredential for ${parsed.id}`);
      return fetched;
    };
    endpoint = await reread();
  } else {
    const caPem = nonEmpty(options.caPem);
    endpoint = { server: apiServerUrl(server!, "the API server URL"), caPem: caPem ? caBundlePem(caPem, "the API server CA") : undefined };
  }

  const tokens = entraTokenCache(options.credential, aksServerScope, {
    purpose: "the AKS API server",
    now,
    ...(options.refreshMarginMs !== undefined ? { refreshMarginMs: options.refreshMarginMs } : {}),
    ...(options.tokenTimeoutMs !== undefined ? { fetchTimeoutMs: options.tokenTimeoutMs } : {}),
    ...(log ? { log } : {}),
  });
  const config = new EntraKubeConfig({ endpoint, tokens, reread, resourceId: id, now, minRefreshIntervalMs: options.minRefreshIntervalMs ?? 30_000 });
  if (options.prefetchToken ?? true) await tokens.token();
  return config;
}

/**
 * The identity to use: a user-assigned managed identity named by its client ID where the
 * platform provides managed identities (App Service and Functions set IDENTITY_ENDPOINT, AKS
 * workload identity sets AZURE_FEDERATED_TOKEN_FILE); elsewhere, such as a developer's machine,
 * DefaultAzureCredential's chain (environment, workload identity, managed identity, Azure CLI…).
 * Only the first can replace a refused token with a fresh one; the chain is for development.
 */
export function azureCredential(clientId?: string, env: NodeJS.ProcessEnv = process.env): TokenCredential {
  const id = nonEmpty(clientId);
  if (id && managedIdentityAvailable(env)) return managedIdentityCredential(id, env);
  return new DefaultAzureCredential(id ? { managedIdentityClientId: id } : {});
}

export function managedIdentityAvailable(env: NodeJS.ProcessEnv): boolean {
  return Boolean(nonEmpty(env.IDENTITY_ENDPOINT) || nonEmpty(env.MSI_ENDPOINT) || nonEmpty(env.AZURE_FEDERATED_TOKEN_FILE));
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}
