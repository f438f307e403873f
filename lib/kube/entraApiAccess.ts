import type { Cluster, User } from "@kubernetes/client-node";
import type { RequestOptions } from "node:https";
import type { ApiServerCredentials } from "./apiServerConnection.js";
import type { ApiServerEndpoint } from "./apiServerEndpoint.js";
import type { EntraApiAccessParts, EntraClusterOptions } from "./entraAccess.js";
import type { EntraTokenCache, EntraTokenStatus } from "./entraTokenCache.js";

// How a managed cluster is reached with Entra tokens. It lives apart from entraAccess.ts, which
// talks to Azure (identity, ARM). It needs no kubeconfig, so an instance that uses Entra (every
// Function App) never loads @kubernetes/client-node: about 1.4 MB of code, 0.3 s and 30 MiB of
// resident memory when evaluated, which a cold start would pay for nothing.

export type ClusterCredentialsRefresh =
  | { readonly outcome: "skipped"; readonly reason: string }
  | { readonly outcome: "unchanged" }
  | { readonly outcome: "updated"; readonly serverChanged: boolean; readonly caChanged: boolean };

const entraUserName = "entra-managed-identity";

/**
 * The API server's URL and CA, with `Authorization: Bearer <Entra token>` on every call: the
 * connection (apiServerConnection) applies credentials on each call, so a renewed token or a
 * re-read CA takes effect on the next one. It answers the same three questions client-node's
 * KubeConfig does for a connection (the current cluster, its user, the credentials and TLS
 * settings of a request). Made by entraApiAccess().
 */
export class EntraApiAccess implements ApiServerCredentials {
  readonly resourceId: string | undefined;
  readonly #tokens: EntraTokenCache;
  readonly #reread: (() => Promise<ApiServerEndpoint>) | undefined;
  readonly #now: () => number;
  readonly #minRefreshIntervalMs: number;
  #endpoint: ApiServerEndpoint;
  #generation = 0;
  #lastRead: number;
  #refreshing: Promise<ClusterCredentialsRefresh> | undefined;
  #cluster!: Cluster;

  constructor(parts: EntraApiAccessParts) {
    this.resourceId = parts.resourceId;
    this.#tokens = parts.tokens;
    this.#reread = parts.reread;
    this.#now = parts.now;
    this.#minRefreshIntervalMs = parts.minRefreshIntervalMs;
    this.#endpoint = parts.endpoint;
    this.#lastRead = parts.now();
    this.#install(parts.endpoint);
  }

  getCurrentCluster(): Cluster {
    return this.#cluster;
  }

  /** A user with no secret of its own: the token is fetched for each call, never kept here. */
  getCurrentUser(): User {
    return { name: entraUserName };
  }

  /** The token of the moment and the CA the cluster's certificate must chain to. */
  async applyToHTTPSOptions(options: RequestOptions): Promise<void> {
    const token = await this.#tokens.token();
    options.headers = { ...options.headers, Authorization: `Bearer ${token}` };
    if (this.#endpoint.caPem !== undefined) options.ca = this.#endpoint.caPem;
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
    // A new name for every endpoint, for messages; the connection opens a new pool whenever the
    // URL or the CA changes.
    this.#generation += 1;
    this.#cluster = { name: `aks-${this.#generation}`, server: endpoint.server, skipTLSVerify: false };
  }
}

/** Builds the access, reading the API server's URL and CA from ARM when given a resource ID. */
export async function entraApiAccess(options: EntraClusterOptions): Promise<EntraApiAccess> {
  const { entraApiAccessParts } = await import("./entraAccess.js");
  const parts = await entraApiAccessParts(options);
  const config = new EntraApiAccess(parts);
  if (options.prefetchToken ?? true) await parts.tokens.token();
  return config;
}
