import { gmsaMatchConditions } from "./matchConditions.js";

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

export { webhookConfigurationName } from "../lib/canary/webhookCa.js";
export const excludedNamespaceLabel = { key: "windows.k8s.io/disabled", value: "true" } as const;

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

export type WebhookPath = "/mutate" | "/validate" | "/validate-credspec";

function clientConfig(target: WebhookTarget, path: WebhookPath) {
  const caBundle = target.caBundlePem ? { caBundle: Buffer.from(target.caBundlePem).toString("base64") } : {};
  if (target.kind === "url") return { url: `${target.baseUrl.replace(/\/+$/, "")}${target.pathPrefix ?? ""}${path}`, ...caBundle };
  return { service: { namespace: target.namespace, name: target.name, path, port: target.port }, ...caBundle };
}

/**
 * Namespaces that never reach the webhooks: kube-system, and those an operator opts out with the
 * label. Nothing else: a label put on namespaces for other reasons (operator scaffolding writes
 * `control-plane: controller-manager`) must not switch the checks off. Pods without GMSA
 * settings are kept away by the matchConditions wherever they run.
 */
const namespaceSelector = {
  matchExpressions: [
    { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] },
    { key: excludedNamespaceLabel.key, operator: "NotIn", values: [excludedNamespaceLabel.value] },
  ],
};

function common(options: WebhookOptions, path: "/mutate" | "/validate") {
  return {
    clientConfig: clientConfig(options.target, path),
    admissionReviewVersions: ["v1", "v1beta1"],
    sideEffects: "None",
    failurePolicy: "Fail",
    matchPolicy: "Equivalent",
    timeoutSeconds: options.timeoutSeconds,
    namespaceSelector,
    matchConditions: gmsaMatchConditions(),
  };
}

export function mutatingWebhookConfiguration(options: WebhookOptions) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: configurationMetadata(options.name),
    webhooks: [
      {
        name: "mutate.gmsa-admission.windows.k8s.io",
        ...common(options, "/mutate"),
        rules: [
          { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" },
          { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/ephemeralcontainers"], scope: "Namespaced" },
        ],
        // Another mutating webhook may name a credential spec after this one ran.
        reinvocationPolicy: "IfNeeded",
      },
    ],
  };
}

export function validatingWebhookConfiguration(options: WebhookOptions) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: configurationMetadata(options.name),
    webhooks: [
      {
        name: "validate.gmsa-admission.windows.k8s.io",
        ...common(options, "/validate"),
        rules: [
          { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods", "pods/ephemeralcontainers"], scope: "Namespaced" },
          // Annotations can also change through the status subresource.
          { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/status"], scope: "Namespaced" },
          // A Binding's annotations are copied onto the pod it binds (both spellings of the
          // binding endpoint); the matchConditions let through only those that carry GMSA keys.
          { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods/binding", "bindings"], scope: "Namespaced" },
        ],
      },
      credSpecWebhook(options),
    ],
  };
}

/**
 * Checks GMSACredentialSpec objects as they are created or changed, and nothing else: the rules
 * name that one resource, so no pod and no other object ever waits on it. failurePolicy Fail:
 * credential specs are written rarely, by administrators, and a webhook that is down only delays
 * those writes; Ignore would let a broken or tampered spec in whenever the webhook cannot be
 * reached, which is when nobody is looking. No namespaceSelector: the objects are
 * cluster-scoped, so it would not apply.
 */
function credSpecWebhook(options: WebhookOptions) {
  return {
    name: "credspec.gmsa-admission.windows.k8s.io",
    clientConfig: clientConfig(options.target, "/validate-credspec"),
    admissionReviewVersions: ["v1", "v1beta1"],
    sideEffects: "None",
    failurePolicy: "Fail",
    matchPolicy: "Equivalent",
    timeoutSeconds: options.timeoutSeconds,
    rules: [{ apiGroups: ["windows.k8s.io"], apiVersions: ["v1", "v1alpha1"], operations: ["CREATE", "UPDATE"], resources: ["gmsacredentialspecs"], scope: "Cluster" }],
  };
}
