import { KubeConfig } from "@kubernetes/client-node";
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { applyObjects } from "../cluster/applyObjects.js";
import { clusterManifests, type KubernetesObject } from "../cluster/manifests.js";
import { startControlPlane, type ControlPlane } from "../controlplane/start.js";

/**
 * A local cluster for `npm start` and the end-to-end tests: a real control plane, a restricted
 * identity for the webhook (only what the product's ClusterRole grants), and optional users.
 */
export interface LocalCluster {
  readonly controlPlane: ControlPlane;
  /** Full rights: what the person at the keyboard uses. */
  readonly adminKubeconfig: string;
  /** The webhook's own identity. */
  readonly webhookKubeconfig: string;
  /** One kubeconfig per extra user, by name. */
  readonly userKubeconfigs: Readonly<Record<string, string>>;
  stop(): Promise<void>;
}

export const localWebhookUser = "gmsa-admission-webhook";
const examplesDir = join(__dirname, "..", "examples");

export async function startLocalCluster(
  options: { users?: ReadonlyArray<{ name: string; groups: string[] }>; dataDir?: string; log?: (line: string) => void } = {},
): Promise<LocalCluster> {
  const identities = [{ name: localWebhookUser, groups: [] as string[] }, ...(options.users ?? [])].map((u, i) => ({
    ...u,
    token: randomBytes(24).toString("hex"),
    uid: `local-${i}`,
  }));
  const controlPlane = await startControlPlane({
    withControllerManager: true,
    tokens: identities.map((u) => ({ token: u.token, user: u.name, uid: u.uid, groups: u.groups })),
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
  const kubeconfigs = Object.fromEntries(identities.map((u) => [u.name, writeTokenKubeconfig(controlPlane, u.name, u.token)]));
  return {
    controlPlane,
    adminKubeconfig: controlPlane.kubeconfigPath,
    webhookKubeconfig: kubeconfigs[localWebhookUser]!,
    userKubeconfigs: kubeconfigs,
    stop: () => controlPlane.stop(),
  };
}

function writeTokenKubeconfig(controlPlane: ControlPlane, user: string, token: string): string {
  const path = join(controlPlane.dataDir, `${user}.kubeconfig`);
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
    { mode: 0o600 },
  );
  return path;
}

export function loadKubeconfigFile(path: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(path);
  return config;
}

export function exampleObjects(file: string): KubernetesObject[] {
  return parseAllDocuments(readFileSync(join(examplesDir, file), "utf8"))
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

export function exampleCredSpecs(): KubernetesObject[] {
  return readdirSync(join(examplesDir, "credspecs"))
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .flatMap((f) => exampleObjects(join("credspecs", f)));
}

/**
 * Installs the product's objects pointing at a webhook served by URL, and the example credential
 * specs. `authorizeRequestingUser` is the webhook's own setting: its role must match the checks it
 * runs. The examples go in before the webhook configurations: one of them is deliberately broken,
 * standing for an object created before the credential spec webhook was wired, which pod
 * admission must still refuse to use.
 */
export async function wireLocalCluster(cluster: Pick<LocalCluster, "adminKubeconfig">, webhook: LocalWebhookWiring, extra: readonly KubernetesObject[] = []): Promise<void> {
  await applyObjects(loadKubeconfigFile(cluster.adminKubeconfig), localWiring(webhook, extra));
}

export interface LocalWebhookWiring {
  readonly url: string;
  readonly caPem: string;
  readonly authorizeRequestingUser: boolean;
  /** The in-cluster safety net (lib/wiring/safetyNet.ts); on unless false. */
  readonly safetyNet?: boolean;
  /** The audit's read-only role (cluster/auditRbac.ts), for GMSA_AUDIT; off unless true. */
  readonly audit?: boolean;
}

/** What `wireLocalCluster` applies, in its order. */
export function localWiring(webhook: LocalWebhookWiring, extra: readonly KubernetesObject[] = []): KubernetesObject[] {
  const manifests = clusterManifests({
    target: { kind: "url", baseUrl: webhook.url, caBundlePem: webhook.caPem },
    subject: { kind: "User", name: localWebhookUser },
    authorizeRequestingUser: webhook.authorizeRequestingUser,
    safetyNet: webhook.safetyNet !== false,
    audit: webhook.audit === true,
  });
  const isWebhookConfiguration = (object: KubernetesObject) => object.kind.endsWith("WebhookConfiguration");
  return [...manifests.filter((object) => !isWebhookConfiguration(object)), ...exampleCredSpecs(), ...manifests.filter(isWebhookConfiguration), ...extra];
}
