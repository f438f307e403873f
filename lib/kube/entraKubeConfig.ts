import { KubeConfig, type Cluster } from "@kubernetes/client-node";
import type { ApiServerEndpoint } from "./apiServerEndpoint.js";
import type { EntraClusterOptions, EntraKubeConfigParts } from "./entraAccess.js";
import type { EntraTokenCache, EntraTokenStatus } from "./entraTokenCache.js";

// The KubeConfig of a managed cluster reached with Entra tokens. It lives apart from
// entraAccess.ts, which talks to Azure (identity, ARM) and is loaded only by an instance that
// uses Entra.

export type ClusterCredentialsRefresh =
  | { readonly outcome: "skipped"; readonly reason: string }
  | { readonly outcome: "unchanged" }
  | { readonly outcome: "updated"; readonly serverChanged: boolean; readonly caChanged: boolean };

const entraUserName = "entra-managed-identity";

/**
 * A KubeConfig whose every request carries `Authorization: Bearer <Entra token>`: the token is
 * applied by an authenticator, which client-node consults whenever credentials are applied
 * (`applyToHTTPSOptions`, on every call of the API server connection). Made by entraKubeConfig().
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
   * connections fail. At most once per interval; concurrent calls share one read. A new CA or
   * server URL takes effect for the next call (the connection reads both on every call, and opens
   * a new pool when they change); a watch already open keeps its stream until it ends. A re-read
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
  const { entraKubeConfigParts } = await import("./entraAccess.js");
  const parts = await entraKubeConfigParts(options);
  const config = new EntraKubeConfig(parts);
  if (options.prefetchToken ?? true) await parts.tokens.token();
  return config;
}
