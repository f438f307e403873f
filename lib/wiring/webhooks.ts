import { gmsaMatchConditions } from "./matchConditions.js";

/**
 * What the product's webhook configurations hold whatever they are wired to: the webhooks' names,
 * rules, selectors, conditions and failure policy. The renderer (cluster/webhookConfigurations.ts)
 * adds where each webhook is reached and its timeout; the credential spec audit checks that what
 * a cluster stores still holds every field here (lib/credspec/auditWiring.ts).
 */
export const webhookConfigurationName = "gmsa-admission";

/** Where each webhook is served: the end of its URL, or its path on the relay's service. */
export const webhookPaths = {
  "mutate.gmsa-admission.windows.k8s.io": "/mutate",
  "validate.gmsa-admission.windows.k8s.io": "/validate",
  "credspec.gmsa-admission.windows.k8s.io": "/validate-credspec",
} as const;

export type WebhookName = keyof typeof webhookPaths;
export type WebhookPath = (typeof webhookPaths)[WebhookName];

export const excludedNamespaceLabel = { key: "windows.k8s.io/disabled", value: "true" } as const;

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

const always = { admissionReviewVersions: ["v1", "v1beta1"], sideEffects: "None", failurePolicy: "Fail", matchPolicy: "Equivalent" };

export function mutateWebhook() {
  return {
    name: "mutate.gmsa-admission.windows.k8s.io" as const,
    ...always,
    namespaceSelector,
    matchConditions: gmsaMatchConditions(),
    rules: [
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "Namespaced" },
      { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/ephemeralcontainers"], scope: "Namespaced" },
    ],
    // Another mutating webhook may name a credential spec after this one ran.
    reinvocationPolicy: "IfNeeded",
  };
}

export function validateWebhook() {
  return {
    name: "validate.gmsa-admission.windows.k8s.io" as const,
    ...always,
    namespaceSelector,
    matchConditions: gmsaMatchConditions(),
    rules: [
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods", "pods/ephemeralcontainers"], scope: "Namespaced" },
      // Annotations can also change through the status subresource.
      { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/status"], scope: "Namespaced" },
      // A Binding's annotations are copied onto the pod it binds (both spellings of the
      // binding endpoint); the matchConditions let through only those that carry GMSA keys.
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods/binding", "bindings"], scope: "Namespaced" },
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
export function credSpecWebhook() {
  return {
    name: "credspec.gmsa-admission.windows.k8s.io" as const,
    ...always,
    rules: [{ apiGroups: ["windows.k8s.io"], apiVersions: ["v1", "v1alpha1"], operations: ["CREATE", "UPDATE"], resources: ["gmsacredentialspecs"], scope: "Cluster" }],
  };
}
