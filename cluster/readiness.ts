import { randomBytes } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { classifyReadiness, readinessPod, unknownCredSpecName, type ReadinessOptions, type ReadinessResult } from "../lib/canary/probe.js";
import { apiServerConnection, ApiServerConnectionError } from "../lib/kube/apiServerConnection.js";

export { classifyReadiness, readinessPod, type ReadinessHop, type ReadinessResult } from "../lib/canary/probe.js";

export async function checkReadiness(config: KubeConfig, options: ReadinessOptions = {}): Promise<ReadinessResult> {
  const namespace = options.namespace ?? "default";
  const serviceAccount = options.serviceAccount ?? "default";
  const credSpec = unknownCredSpecName(randomBytes(6).toString("hex"));
  const connection = apiServerConnection(config, { timeoutMs: options.timeoutMs ?? 45_000 });
  try {
    const reply = await connection.send({
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods?dryRun=All&fieldManager=gmsa-admission-readiness`,
      body: readinessPod(namespace, serviceAccount, credSpec),
    });
    return classifyReadiness(reply, credSpec);
  } catch (error) {
    if (!(error instanceof ApiServerConnectionError)) throw error;
    return { hop: "unexpected", summary: "the check could not reach the API server with the current kubeconfig", detail: error.message };
  } finally {
    await connection.close();
  }
}
