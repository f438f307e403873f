import { gmsaMatchConditions } from "./matchConditions.js";

/** Where the API server sends AdmissionReviews: the function's URL, or the relay's service. */
export type WebhookTarget =
  | { readonly kind: "url"; readonly baseUrl: string; readonly caBundlePem?: string }
  | { readonly kind: "service"; readonly namespace: string; readonly name: string; readonly port: number; readonly caBundlePem: string };

export interface WebhookOptions {
  readonly target: WebhookTarget;
  /** How long the API server waits; keep it short, every GMSA pod creation waits on it. */
  readonly timeoutSeconds: number;
  readonly name: string;
}

export const webhookConfigurationName = "gmsa-admission";
export const excludedNamespaceLabel = { key: "windows.k8s.io/disabled", value: "true" } as const;

function clientConfig(target: WebhookTarget, path: "/mutate" | "/validate") {
  const caBundle = target.caBundlePem ? { caBundle: Buffer.from(target.caBundlePem).toString("base64") } : {};
  if (target.kind === "url") return { url: `${target.baseUrl.replace(/\/+$/, "")}${path}`, ...caBundle };
  return { service: { namespace: target.namespace, name: target.name, path, port: target.port }, ...caBundle };
}

/**
 * Namespaces that must never wait on the webhook: kube-system, AKS's own control-plane
 * namespaces, and any namespace an operator opts out with the label.
 */
const namespaceSelector = {
  matchExpressions: [
    { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] },
    { key: "control-plane", operator: "DoesNotExist" },
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
    metadata: { name: options.name, labels: { "app.kubernetes.io/name": "gmsa-admission" } },
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
    metadata: { name: options.name, labels: { "app.kubernetes.io/name": "gmsa-admission" } },
    webhooks: [
      {
        name: "validate.gmsa-admission.windows.k8s.io",
        ...common(options, "/validate"),
        rules: [
          { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods", "pods/ephemeralcontainers"], scope: "Namespaced" },
          // Annotations can also change through the status subresource.
          { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/status"], scope: "Namespaced" },
        ],
      },
    ],
  };
}
