import { KubeConfig } from "@kubernetes/client-node";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { applyObjects } from "../../cluster/applyObjects.js";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { startLocalWebhook, type LocalWebhook } from "./localWebhook.js";

/**
 * A real kube-apiserver (and controller manager) with the product wired in by URL: the webhook
 * runs in this process on the local host, under its own restricted identity, and the API server
 * calls it over TLS for every pod with GMSA settings.
 */
export interface E2eCluster {
  readonly controlPlane: ControlPlane;
  readonly admin: KubeConfig;
  /** A developer with no rights of their own beyond what tests grant. */
  readonly developer: KubeConfig;
  webhook: LocalWebhook;
  readonly webhookEnv: Record<string, string>;
  readonly webhookPort: number;
  apply(objects: readonly KubernetesObject[]): Promise<void>;
  close(): Promise<void>;
}

export const webhookUser = "gmsa-admission-webhook";
const examplesDir = join(__dirname, "..", "..", "examples");

export function exampleObjects(file: string): KubernetesObject[] {
  return parseAllDocuments(readFileSync(join(examplesDir, file), "utf8"))
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

function kubeconfigFor(controlPlane: ControlPlane, user: string, token: string, file: string): string {
  const path = join(controlPlane.dataDir, file);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "local", cluster: { server: controlPlane.server, "certificate-authority-data": Buffer.from(controlPlane.caPem).toString("base64") } }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: user, context: { cluster: "local", user } }],
      "current-context": user,
    }),
  );
  return path;
}

function load(path: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(path);
  return config;
}

export async function startE2eCluster(options: { webhookEnv?: Record<string, string> } = {}): Promise<E2eCluster> {
  const webhookToken = randomBytes(24).toString("hex");
  const developerToken = randomBytes(24).toString("hex");
  const controlPlane = await startControlPlane({
    withControllerManager: true,
    tokens: [
      { token: webhookToken, user: webhookUser, uid: "webhook-1", groups: [] },
      { token: developerToken, user: "alice", uid: "alice-1", groups: ["developers"] },
    ],
    log: () => {},
  });
  let webhookToClose: LocalWebhook | undefined;
  try {
    const admin = load(controlPlane.kubeconfigPath);
    const webhookEnv = { KUBECONFIG: kubeconfigFor(controlPlane, webhookUser, webhookToken, "webhook.kubeconfig"), ...options.webhookEnv };
    const webhook = await startLocalWebhook(webhookEnv);
    webhookToClose = webhook;
    const cluster: E2eCluster = {
      controlPlane,
      admin,
      developer: load(kubeconfigFor(controlPlane, "alice", developerToken, "alice.kubeconfig")),
      webhook,
      webhookEnv,
      webhookPort: webhook.server.port,
      apply: async (objects) => void (await applyObjects(admin, objects)),
      close: async () => {
        await cluster.webhook.close().catch(() => {});
        await controlPlane.stop();
      },
    };
    await cluster.apply([
      ...clusterManifests({
        target: { kind: "url", baseUrl: webhook.server.url, caBundlePem: webhook.caPem },
        subject: { kind: "User", name: webhookUser },
      }),
      ...["aks-keyvault-ccg.yaml", "no-credspec-field.yaml", "webapp1.yaml"].flatMap((f) => exampleObjects(`credspecs/${f}`)),
    ]);
    return cluster;
  } catch (error) {
    await webhookToClose?.close();
    await controlPlane.stop();
    throw error;
  }
}

export function readText(path: string): string {
  return readFileSync(path, "utf8");
}
