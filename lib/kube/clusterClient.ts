import { AuthorizationV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import type { CredSpecSource, UseAuthorizer } from "../gmsa/ports.js";
import type { AdmissionSettings } from "../settings.js";
import { useDecisionCache } from "../caching/useDecisionCache.js";
import { credSpecApi } from "./credSpecApi.js";
import { credSpecCache, type CredSpecCacheStatus } from "./credSpecCache.js";
import { useAuthorization } from "./useAuthorization.js";

/** The cluster-facing half of the product: the two ports, bound to one API server. */
export interface ClusterPorts {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly server: string;
  cacheStatus(): CredSpecCacheStatus | undefined;
  stop(): Promise<void>;
}

export function loadKubeConfig(cluster: AdmissionSettings["cluster"]): KubeConfig {
  const config = new KubeConfig();
  if (cluster.access === "kubeconfig") config.loadFromFile(cluster.kubeconfig);
  else config.loadFromCluster();
  if (!config.getCurrentCluster()) throw new Error(`the kubeconfig names no current cluster (${cluster.access})`);
  return config;
}

export type ClusterLog = (level: "info" | "warn", message: string) => void;

const consoleLog: ClusterLog = (level, message) => (level === "warn" ? console.warn(message) : console.info(message));

export function clusterPorts(settings: AdmissionSettings, log: ClusterLog = consoleLog): ClusterPorts {
  return portsFor(loadKubeConfig(settings.cluster), settings, log);
}

/** The ports over one KubeConfig: direct reads behind the credential spec cache, answers behind the decision cache. */
export function portsFor(config: KubeConfig, settings: AdmissionSettings, log: ClusterLog = consoleLog): ClusterPorts {
  const direct = credSpecApi(config.makeApiClient(CustomObjectsApi), settings.apiTimeoutMs);
  const cache = settings.credSpecCache ? credSpecCache(config, { direct, log }) : undefined;
  return {
    credSpecs: cache ?? direct,
    authorizer: useDecisionCache(useAuthorization(config.makeApiClient(AuthorizationV1Api), settings.apiTimeoutMs), { ttlMs: settings.authCacheTtlMs }),
    server: config.getCurrentCluster()!.server,
    cacheStatus: () => cache?.status(),
    stop: async () => void (await cache?.stop()),
  };
}
