import type { TokenCredential } from "@azure/core-auth";
import { DefaultAzureCredential } from "@azure/identity";
import { checkAksApiServer, isLoopbackOrigin } from "./aksApiServerHost.js";
import { aksArmApiVersion, armEndpointOrigin, defaultArmEndpoint, readManagedCluster, type ArmFetch, type AksEndpointRequest } from "./aksClusterEndpoint.js";
import { parseAksResourceId } from "./aksResourceId.js";
import { apiServerUrl, caBundlePem, type ApiServerEndpoint } from "./apiServerEndpoint.js";
import { entraTokenCache, type EntraTokenCache } from "./entraTokenCache.js";
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

/** What an EntraApiAccess is made of (lib/kube/entraApiAccess.ts), read here from Azure. */
export interface EntraApiAccessParts {
  readonly endpoint: ApiServerEndpoint;
  readonly tokens: EntraTokenCache;
  /** Present when the endpoint came from ARM and can be read again. */
  readonly reread: (() => Promise<ApiServerEndpoint>) | undefined;
  readonly resourceId: string | undefined;
  readonly now: () => number;
  readonly minRefreshIntervalMs: number;
}

export class EntraAccessError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EntraAccessError";
  }
}

/**
 * What an EntraApiAccess is made of (lib/kube/entraApiAccess.ts makes it): the API server's URL
 * and CA, read from ARM when given a resource ID, and the cache of its Entra tokens.
 */
export async function entraApiAccessParts(options: EntraClusterOptions): Promise<EntraApiAccessParts> {
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
      // What the cluster resource says its names are, and where the kubeconfig points (both read
      // at once): the token goes only where both agree.
      const { hostNames: clusterHostNames, endpoint: fetched } = await readManagedCluster(request);
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
  return { endpoint, tokens, reread, resourceId: id, now, minRefreshIntervalMs: options.minRefreshIntervalMs ?? 30_000 };
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
