import type { KubeConfig } from "@kubernetes/client-node";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { applyObjects } from "../../cluster/applyObjects.js";
import { loadKubeconfigFile, startLocalCluster, wireLocalCluster, type LocalCluster } from "../../host/localCluster.js";
import { startLocalWebhook, type LocalWebhook } from "./localWebhook.js";

/**
 * A real kube-apiserver (and controller manager) with the product wired in by URL, as `npm start`
 * sets it up: the webhook runs in this process on the local host under its own restricted
 * identity, and the API server calls it over TLS for every pod with GMSA settings.
 */
export interface E2eCluster {
  readonly local: LocalCluster;
  readonly admin: KubeConfig;
  /** A developer with no rights of their own beyond what tests grant. */
  readonly developer: KubeConfig;
  webhook: LocalWebhook;
  readonly webhookEnv: Record<string, string>;
  readonly webhookPort: number;
  apply(objects: readonly KubernetesObject[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * `safetyNet` is off unless asked for: these suites test the function's own answers, and where the
 * in-cluster policy holds a rule it answers first (the API server runs policies before validating
 * webhooks). The safety net has suites of its own (test/e2e/safetyNet*.test.ts), and the wiring
 * `npm start` applies, safety net included, is read back in test/e2e/storedWiring.test.ts.
 */
export async function startE2eCluster(options: { webhookEnv?: Record<string, string>; safetyNet?: boolean } = {}): Promise<E2eCluster> {
  const local = await startLocalCluster({ users: [{ name: "alice", groups: ["developers"] }], log: () => {} });
  let webhook: LocalWebhook | undefined;
  try {
    const webhookEnv = { KUBECONFIG: local.webhookKubeconfig, ...options.webhookEnv };
    webhook = await startLocalWebhook(webhookEnv);
    await wireLocalCluster(local, {
      url: webhook.server.url,
      caPem: webhook.caPem,
      authorizeRequestingUser: webhook.settings.authorizeRequestingUser,
      safetyNet: options.safetyNet === true,
    });
    const admin = loadKubeconfigFile(local.adminKubeconfig);
    const cluster: E2eCluster = {
      local,
      admin,
      developer: loadKubeconfigFile(local.userKubeconfigs.alice!),
      webhook,
      webhookEnv,
      webhookPort: webhook.server.port,
      apply: async (objects) => void (await applyObjects(admin, objects)),
      close: async () => {
        await cluster.webhook.close().catch(() => {});
        await local.stop();
      },
    };
    return cluster;
  } catch (error) {
    await webhook?.close();
    await local.stop();
    throw error;
  }
}
