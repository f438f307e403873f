import { webhookConfigurationName } from "./webhookConfigurations.js";

/**
 * What the webhook's own identity may do in the cluster: read credential specs (the cache lists
 * and watches them), ask access reviews, and read the product's own mutating webhook
 * configuration (the canary reports when its CA bundle expires). Nothing else.
 */
export type WebhookSubject = { readonly kind: "User"; readonly name: string } | { readonly kind: "ServiceAccount"; readonly name: string; readonly namespace: string };

export const webhookClusterRoleName = "gmsa-admission-webhook";

export interface WebhookRoleOptions {
  /**
   * The webhook also checks the requesting user (GMSA_AUTHORIZE_REQUESTING_USER): that check is
   * a cluster-wide SubjectAccessReview, which the service-account check does not need.
   */
  readonly authorizeRequestingUser?: boolean;
}

export function webhookClusterRole(options: WebhookRoleOptions = {}) {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: webhookClusterRoleName, labels: { "app.kubernetes.io/name": "gmsa-admission" } },
    rules: [
      { apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["get", "list", "watch"] },
      {
        apiGroups: ["authorization.k8s.io"],
        resources: ["localsubjectaccessreviews", ...(options.authorizeRequestingUser === true ? ["subjectaccessreviews"] : [])],
        verbs: ["create"],
      },
      // The product's own configuration only: its CA bundle and addresses, nothing secret.
      { apiGroups: ["admissionregistration.k8s.io"], resources: ["mutatingwebhookconfigurations"], resourceNames: [webhookConfigurationName], verbs: ["get"] },
    ],
  };
}

export function webhookClusterRoleBinding(subject: WebhookSubject) {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: webhookClusterRoleName, labels: { "app.kubernetes.io/name": "gmsa-admission" } },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: webhookClusterRoleName },
    subjects: [
      subject.kind === "User"
        ? { apiGroup: "rbac.authorization.k8s.io", kind: "User", name: subject.name }
        : { kind: "ServiceAccount", name: subject.name, namespace: subject.namespace },
    ],
  };
}
