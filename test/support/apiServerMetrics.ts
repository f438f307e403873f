import type { E2eCluster } from "./e2eCluster.js";
import { kubeRequest } from "./kubeRequest.js";

/** Requests the API server has served for a resource, from its own metrics. */
export async function servedFor(cluster: E2eCluster, resource: string): Promise<number> {
  const metrics = (await kubeRequest(cluster.admin, "GET", "/metrics")).body as string;
  let total = 0;
  for (const line of metrics.split("\n")) {
    if (line.startsWith("apiserver_request_total{") && line.includes(`resource="${resource}"`)) total += Number(line.split(" ").pop());
  }
  return total;
}
