import { KubeConfig } from "@kubernetes/client-node";
import type { ClusterAccessSettings } from "./clusterAccess.js";
import { plainHttpProblem } from "./plainHttp.js";

// Loaded on demand (clusterClient.ts, the fleet runtime): client-node is the largest module an
// instance could load, and an instance that reaches its cluster through Entra never needs it.

/**
 * A kubeconfig file (in the context it names, if it names one) or the pod's own service
 * account: read from disk only, so it can be checked at start-up without reaching the cluster.
 */
export function localKubeConfig(cluster: Exclude<ClusterAccessSettings, { access: "entra" }>): KubeConfig {
  const config = new KubeConfig();
  if (cluster.access === "kubeconfig") {
    config.loadFromFile(cluster.kubeconfig);
    if (cluster.context !== undefined) {
      const known = config.getContexts().map((c) => c.name);
      if (!known.includes(cluster.context)) {
        throw new Error(`the kubeconfig ${cluster.kubeconfig} has no context "${cluster.context}" (it has ${known.length > 0 ? known.map((n) => `"${n}"`).join(", ") : "none"})`);
      }
      config.setCurrentContext(cluster.context);
    }
  } else config.loadFromCluster();
  const current = config.getCurrentCluster();
  if (!current) throw new Error(`the kubeconfig names no current cluster (${cluster.access})`);
  // Refused here, so that the instance never reports healthy and then fails every admission.
  const problem = plainHttpProblem(current.server);
  if (problem)
    throw new Error(cluster.access === "kubeconfig" ? `KUBECONFIG (${cluster.kubeconfig}) cannot be used: ${problem}` : `the in-cluster configuration cannot be used: ${problem}`);
  return config;
}
