import { AuthorizationV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import type { CredSpecSource, UseAuthorizer } from "../gmsa/ports.js";
import type { AdmissionSettings } from "../settings.js";
import { credSpecApi } from "./credSpecApi.js";
import { useAuthorization } from "./useAuthorization.js";

/** The cluster-facing half of the product: the two ports, bound to one API server. */
export interface ClusterPorts {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly server: string;
}

export function loadKubeConfig(cluster: AdmissionSettings["cluster"]): KubeConfig {
  const config = new KubeConfig();
  if (cluster.access === "kubeconfig") config.loadFromFile(cluster.kubeconfig);
  else config.loadFromCluster();
  if (!config.getCurrentCluster()) throw new Error(`the kubeconfig names no current cluster (${cluster.access})`);
  return config;
}

export function clusterPorts(settings: AdmissionSettings): ClusterPorts {
  const config = loadKubeConfig(settings.cluster);
  return {
    credSpecs: credSpecApi(config.makeApiClient(CustomObjectsApi), settings.apiTimeoutMs),
    authorizer: useAuthorization(config.makeApiClient(AuthorizationV1Api), settings.apiTimeoutMs),
    server: config.getCurrentCluster()!.server,
  };
}
