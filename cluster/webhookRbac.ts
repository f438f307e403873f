/**
 * What the webhook's own identity may do in the cluster: read credential specs (the cache lists
 * and watches them) and ask access reviews. Nothing else.
 */
export type WebhookSubject =
  | { readonly kind: "User"; readonly name: string }
  | { readonly kind: "ServiceAccount"; readonly name: string; readonly namespace: string };

export const webhookClusterRoleName = "gmsa-admission-webhook";

export function webhookClusterRole() {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: webhookClusterRoleName, labels: { "app.kubernetes.io/name": "gmsa-admission" } },
    rules: [
      { apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["authorization.k8s.io"], resources: ["localsubjectaccessreviews", "subjectaccessreviews"], verbs: ["create"] },
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
