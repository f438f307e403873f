/**
 * What the webhook's own identity may do in the cluster: read credential specs (the cache lists
 * and watches them) and ask access reviews. Nothing else.
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
