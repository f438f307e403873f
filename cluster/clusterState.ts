import { ApiException, KubernetesObjectApi, type KubeConfig, type KubernetesObject as ClientObject } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { fieldManager } from "./applyObjects.js";
import { credSpecCrdName } from "./credSpecCrd.js";
import type { KubernetesObject } from "./manifests.js";
import { relayClusterSecretKey, relayFunctionKeySecretName, relayName, type RelayCertificate } from "./relay.js";
import { webhookConfigurationName } from "./webhookConfigurations.js";

/** What the wiring must know of a cluster before it renders for it. */
export interface ClusterState {
  /** absent: install it; ours: keep applying it; foreign: someone else's (the AKS add-on), never touch it. */
  readonly crd: "absent" | "ours" | "foreign";
  /** The certificate in the relay's TLS Secret, if there is one. */
  readonly relayCertificate?: Partial<RelayCertificate>;
  /** Other mutating webhooks that look after pods' gMSA settings, as "configuration/webhook". */
  readonly otherGmsaWebhooks: readonly string[];
  /**
   * What the product's webhook configurations trust now for the relay in this namespace (PEM
   * bundles): more than the Secret's CA while a rotation's rollout has not been seen to finish.
   */
  readonly relayCaBundles: readonly string[];
  /** The fleet member's secret header the relay's Secret holds now (its included file), if any. */
  readonly relayClusterSecretInclude?: string;
  /** The URLs the product's webhook configurations call now (url wiring). */
  readonly webhookUrls: readonly string[];
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

export function isNotFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}

/** Reads one object, or undefined when it does not exist. */
export async function readLive(client: KubernetesObjectApi, object: Pick<KubernetesObject, "apiVersion" | "kind" | "metadata">): Promise<ClientObject | undefined> {
  try {
    return await client.read({ apiVersion: object.apiVersion, kind: object.kind, metadata: { name: object.metadata.name, namespace: object.metadata.namespace } });
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

function text(data: unknown, key: string): string | undefined {
  const value = data !== null && typeof data === "object" ? (data as Record<string, unknown>)[key] : undefined;
  return typeof value === "string" ? Buffer.from(value, "base64").toString("utf8") : undefined;
}

interface WebhookLike {
  name?: string;
  rules?: Array<{ operations?: string[]; resources?: string[] }>;
  clientConfig?: { url?: string; service?: { name?: string; namespace?: string } };
}

/** A mutating webhook that acts on pod creation and, by its names, on gMSA. */
function mutatesGmsaPods(configuration: string, webhook: WebhookLike): boolean {
  const onPodCreate = (webhook.rules ?? []).some(
    (rule) =>
      (rule.resources ?? []).some((r) => r === "pods" || r === "*" || r === "*/*") &&
      (rule.operations ?? []).some((op) => op === "CREATE" || op === "*"),
  );
  const names = [configuration, webhook.name, webhook.clientConfig?.url, webhook.clientConfig?.service?.name, webhook.clientConfig?.service?.namespace];
  return onPodCreate && names.some((name) => typeof name === "string" && /gmsa/i.test(name));
}

export async function readClusterState(config: KubeConfig, namespace: string): Promise<ClusterState> {
  const client = KubernetesObjectApi.makeApiClient(config);
  const crd = await readLive(client, { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name: credSpecCrdName } });
  const owners = (crd?.metadata?.managedFields ?? []).map((entry) => entry.manager);
  const secret = await readLive(client, { apiVersion: "v1", kind: "Secret", metadata: { name: `${relayName}-tls`, namespace } });
  const data = secret ? (secret as ClientObject & { data?: unknown }).data : undefined;
  const mutating = await client.list<ClientObject & { webhooks?: WebhookLike[] }>("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration");
  const otherGmsaWebhooks = mutating.items
    .filter((item) => item.metadata?.name !== webhookConfigurationName)
    .flatMap((item) => (item.webhooks ?? []).filter((webhook) => mutatesGmsaPods(item.metadata?.name ?? "", webhook)).map((webhook) => `${item.metadata?.name}/${webhook.name}`));
  const relayCaBundles: string[] = [];
  const webhookUrls: string[] = [];
  for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
    const live = await readLive(client, { apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name: webhookConfigurationName } });
    if (live !== undefined) {
      relayCaBundles.push(...relayCaBundlesOf(live, namespace));
      webhookUrls.push(...urlsOf(live));
    }
  }
  const keySecret = await readLive(client, { apiVersion: "v1", kind: "Secret", metadata: { name: relayFunctionKeySecretName, namespace } });
  const relayClusterSecretInclude = keySecret ? text((keySecret as ClientObject & { data?: unknown }).data, relayClusterSecretKey) : undefined;
  return {
    relayCaBundles,
    webhookUrls,
    ...(relayClusterSecretInclude === undefined ? {} : { relayClusterSecretInclude }),
    crd: crd === undefined ? "absent" : owners.includes(fieldManager) ? "ours" : "foreign",
    ...(secret === undefined ? {} : { relayCertificate: { caPem: text(data, "ca.crt"), certPem: text(data, "tls.crt"), keyPem: text(data, "tls.key") } }),
    otherGmsaWebhooks,
  };
}
