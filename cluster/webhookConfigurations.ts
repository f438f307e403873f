import { credSpecWebhook, mutateWebhook, validateWebhook, webhookPaths, type WebhookName, type WebhookPath } from "../lib/wiring/webhooks.js";

/** Where the API server sends AdmissionReviews: the function's URL, or the relay's service. */
export type WebhookTarget =
  | {
      readonly kind: "url";
      readonly baseUrl: string;
      readonly caBundlePem?: string;
      /** A fleet member's paths (fleetMember.ts memberUrlPathPrefix), before /mutate etc.; none: today's paths. */
      readonly pathPrefix?: string;
    }
  | { readonly kind: "service"; readonly namespace: string; readonly name: string; readonly port: number; readonly caBundlePem: string };

export interface WebhookOptions {
  readonly target: WebhookTarget;
  /** How long the API server waits; keep it short, every GMSA pod creation waits on it. */
  readonly timeoutSeconds: number;
  readonly name: string;
}

export { excludedNamespaceLabel, webhookConfigurationName } from "../lib/wiring/webhooks.js";

/**
 * AKS's Admissions Enforcer rewrites every webhook configuration that lacks this annotation: it
 * adds namespaceSelector exclusions of its own (namespaces labelled `control-plane`, or managed by
 * AKS), through which pods could then carry any credential spec unchecked. The namespaceSelector
 * below already keeps kube-system out, and the matchConditions keep every pod without GMSA
 * settings away from the webhooks, so nothing the enforcer protects ever waits on them.
 */
export const aksAdmissionsEnforcerOptOut = { "admissions.enforcer/disabled": "true" } as const;

function configurationMetadata(name: string) {
  return { name, labels: { "app.kubernetes.io/name": "gmsa-admission" }, annotations: { ...aksAdmissionsEnforcerOptOut } };
}

export type { WebhookPath } from "../lib/wiring/webhooks.js";

function clientConfig(target: WebhookTarget, path: WebhookPath) {
  const caBundle = target.caBundlePem ? { caBundle: Buffer.from(target.caBundlePem).toString("base64") } : {};
  if (target.kind === "url") return { url: `${target.baseUrl.replace(/\/+$/, "")}${target.pathPrefix ?? ""}${path}`, ...caBundle };
  return { service: { namespace: target.namespace, name: target.name, path, port: target.port }, ...caBundle };
}

/** Where the API server reaches a webhook, and how long it waits. */
function reached(options: WebhookOptions, name: WebhookName) {
  return { clientConfig: clientConfig(options.target, webhookPaths[name]), timeoutSeconds: options.timeoutSeconds };
}

export function mutatingWebhookConfiguration(options: WebhookOptions) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: configurationMetadata(options.name),
    webhooks: [withReach(mutateWebhook(), options)],
  };
}

export function validatingWebhookConfiguration(options: WebhookOptions) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: configurationMetadata(options.name),
    webhooks: [withReach(validateWebhook(), options), withReach(credSpecWebhook(), options)],
  };
}

/** A webhook's own fields with where it is reached, in the order the configurations are written. */
function withReach<W extends ReturnType<typeof credSpecWebhook> | ReturnType<typeof mutateWebhook> | ReturnType<typeof validateWebhook>>(webhook: W, options: WebhookOptions) {
  const reach = reached(options, webhook.name);
  const { name, admissionReviewVersions, sideEffects, failurePolicy, matchPolicy, ...rest } = webhook;
  return { name, clientConfig: reach.clientConfig, admissionReviewVersions, sideEffects, failurePolicy, matchPolicy, timeoutSeconds: reach.timeoutSeconds, ...rest };
}
