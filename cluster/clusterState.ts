import type { KubeConfig } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import { originOf, type OtherGmsaWebhook } from "./otherGmsaWebhooks.js";
import * as t from "io-ts";
import { credSpecCrdName } from "../lib/wiring/credSpecCrd.js";
import { fieldManager, KubeApiError, withKubeObjects, type KubeObjects, type StoredObject } from "./kubeObjects.js";
import { relayIngressProblem } from "./relayNetworkPolicy.js";
import { relayClusterSecretKey, relayPodLabels, relayFunctionKeySecretName, relayName, type RelayCertificate } from "./relay.js";
import { webhookConfigurationName } from "./webhookConfigurations.js";

/** What the wiring must know of a cluster before it renders for it. */
export interface ClusterState {
  /** absent: install it; ours: keep applying it; foreign: someone else's (the AKS add-on), never touch it. */
  readonly crd: "absent" | "ours" | "foreign";
  /** The certificate in the relay's TLS Secret, if there is one. */
  readonly relayCertificate?: Partial<RelayCertificate>;
  /** Other mutating webhooks that look after pods' gMSA settings, as "configuration/webhook". */
  readonly otherGmsaWebhooks: readonly OtherGmsaWebhook[];
  /**
   * What the product's webhook configurations trust now for the relay in this namespace (PEM
   * bundles): more than the Secret's CA while a rotation's rollout has not been seen to finish.
   */
  readonly relayCaBundles: readonly string[];
  /** The fleet member's secret header the relay's Secret holds now (its included file), if any. */
  readonly relayClusterSecretInclude?: string;
  /** The URLs the product's webhook configurations call now (url wiring). */
  readonly webhookUrls: readonly string[];
  /**
   * Relays in the cluster (in any namespace the wiring can see) whose stored NetworkPolicies let
   * more than the API server in, and why. Wiring before the apply sent wire JSON stored the relay's
   * ingress rule without its `from`.
   */
  readonly openRelays: ReadonlyArray<{ readonly namespace: string; readonly why: string }>;
}

const WebhookConfigurationCaBundles = t.type({
  webhooks: t.union([
    t.undefined,
    t.array(t.type({ clientConfig: t.partial({ caBundle: t.string, url: t.string, service: t.partial({ name: t.string, namespace: t.string }) }) })),
  ]),
});

/** The caBundles of one of our webhook configurations that address the relay in `namespace`. */
function relayCaBundlesOf(configuration: unknown, namespace: string): string[] {
  const decoded = WebhookConfigurationCaBundles.decode(configuration);
  if (isLeft(decoded)) return [];
  return (decoded.right.webhooks ?? []).flatMap(({ clientConfig }) =>
    clientConfig.service?.name === relayName && clientConfig.service.namespace === namespace && clientConfig.caBundle !== undefined
      ? [Buffer.from(clientConfig.caBundle, "base64").toString("utf8")]
      : [],
  );
}

/** The URLs one of our webhook configurations calls. */
function urlsOf(configuration: unknown): string[] {
  const decoded = WebhookConfigurationCaBundles.decode(configuration);
  if (isLeft(decoded)) return [];
  return (decoded.right.webhooks ?? []).flatMap(({ clientConfig }) => (clientConfig.url === undefined ? [] : [clientConfig.url]));
}

function text(data: unknown, key: string): string | undefined {
  const value = data !== null && typeof data === "object" ? (data as Record<string, unknown>)[key] : undefined;
  return typeof value === "string" ? Buffer.from(value, "base64").toString("utf8") : undefined;
}

const MutatingWebhooks = t.type({
  webhooks: t.union([
    t.undefined,
    t.null,
    t.array(
      t.partial({
        name: t.string,
        rules: t.array(t.partial({ operations: t.array(t.string), resources: t.array(t.string) })),
        clientConfig: t.partial({ url: t.string, service: t.partial({ name: t.string, namespace: t.string }) }),
      }),
    ),
  ]),
});
type WebhookLike = NonNullable<t.TypeOf<typeof MutatingWebhooks>["webhooks"]>[number];

function webhooksOf(configuration: unknown): WebhookLike[] {
  const decoded = MutatingWebhooks.decode(configuration);
  return isLeft(decoded) ? [] : (decoded.right.webhooks ?? []);
}

/** A mutating webhook that acts on pod creation and, by its names, on gMSA. */
function mutatesGmsaPods(configuration: string, webhook: WebhookLike): boolean {
  const onPodCreate = (webhook.rules ?? []).some(
    (rule) => (rule.resources ?? []).some((r) => r === "pods" || r === "*" || r === "*/*") && (rule.operations ?? []).some((op) => op === "CREATE" || op === "*"),
  );
  const names = [configuration, webhook.name, webhook.clientConfig?.url, webhook.clientConfig?.service?.name, webhook.clientConfig?.service?.namespace];
  return onPodCreate && names.some((name) => typeof name === "string" && /gmsa/i.test(name));
}

/**
 * The namespaces that run a relay: every namespace with the relay's Deployment, found by its
 * label; when the wiring may not list Deployments across namespaces, the one it wires alone.
 */
async function relayNamespaces(client: KubeObjects, wired: string): Promise<string[]> {
  const labelSelector = `app.kubernetes.io/name=${relayName}`;
  let deployments: StoredObject[];
  try {
    deployments = await client.list("apps/v1", "Deployment", undefined, { labelSelector });
  } catch (error) {
    if (!(error instanceof KubeApiError && error.code === 403)) throw error;
    deployments = await client.list("apps/v1", "Deployment", wired, { labelSelector });
  }
  return [...new Set(deployments.flatMap((deployment) => (deployment.metadata.namespace === undefined ? [] : [deployment.metadata.namespace])))].sort();
}

export async function readClusterState(config: KubeConfig, namespace: string): Promise<ClusterState> {
  return withKubeObjects(config, async (client) => {
    const crd = await client.read({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name: credSpecCrdName } });
    const owners = (crd?.metadata.managedFields ?? []).map((entry) => entry.manager);
    const secret = await client.read({ apiVersion: "v1", kind: "Secret", metadata: { name: `${relayName}-tls`, namespace } });
    const data = secret?.data;
    const mutating = await client.list("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration");
    const otherGmsaWebhooks = mutating
      .filter((item) => item.metadata.name !== webhookConfigurationName)
      .flatMap((item) => {
        const webhooks = webhooksOf(item);
        const origin = originOf({
          name: item.metadata.name,
          ...(item.metadata.labels ? { labels: item.metadata.labels } : {}),
          ...(item.metadata.annotations ? { annotations: item.metadata.annotations } : {}),
          serviceNamespaces: webhooks.flatMap((webhook) => (webhook.clientConfig?.service?.namespace ? [webhook.clientConfig.service.namespace] : [])),
        });
        return webhooks
          .filter((webhook) => mutatesGmsaPods(item.metadata.name, webhook))
          .map((webhook): OtherGmsaWebhook => ({ configuration: item.metadata.name, webhook: webhook.name ?? "", origin }));
      });
    const relayCaBundles: string[] = [];
    const webhookUrls: string[] = [];
    for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
      const live = await client.read({ apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name: webhookConfigurationName } });
      if (live !== undefined) {
        relayCaBundles.push(...relayCaBundlesOf(live, namespace));
        webhookUrls.push(...urlsOf(live));
      }
    }
    const keySecret = await client.read({ apiVersion: "v1", kind: "Secret", metadata: { name: relayFunctionKeySecretName, namespace } });
    const relayClusterSecretInclude = keySecret ? text(keySecret.data, relayClusterSecretKey) : undefined;
    const openRelays: Array<{ namespace: string; why: string }> = [];
    for (const relayNamespace of await relayNamespaces(client, namespace)) {
      const why = relayIngressProblem(await client.list("networking.k8s.io/v1", "NetworkPolicy", relayNamespace), relayPodLabels);
      if (why !== undefined) openRelays.push({ namespace: relayNamespace, why });
    }
    return {
      relayCaBundles,
      webhookUrls,
      ...(relayClusterSecretInclude === undefined ? {} : { relayClusterSecretInclude }),
      crd: crd === undefined ? "absent" : owners.includes(fieldManager) ? "ours" : "foreign",
      ...(secret === undefined ? {} : { relayCertificate: { caPem: text(data, "ca.crt"), certPem: text(data, "tls.crt"), keyPem: text(data, "tls.key") } }),
      otherGmsaWebhooks,
      openRelays,
    };
  });
}
