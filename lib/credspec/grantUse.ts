import { useBindingName, useRoleName } from "../gmsa/useGrant.js";

export interface GrantRequest {
  readonly credSpec: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  /** A ClusterRole, reusable by bindings in any namespace, rather than a Role in this one. */
  readonly clusterWide: boolean;
}

/**
 * The RBAC objects that let one service account `use` one credential spec and nothing else.
 * The binding is always a RoleBinding in the account's namespace: the account's pods run only
 * there, and that is where the webhook asks (a LocalSubjectAccessReview), so a
 * ClusterRoleBinding would grant nothing more than the reach to be misread.
 */
export function grantUse(request: GrantRequest) {
  const roleName = useRoleName(request.credSpec);
  const labels = { "app.kubernetes.io/managed-by": "gmsa-admission-credspec" };
  const rules = [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: [request.credSpec] }];
  const role = request.clusterWide
    ? { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: roleName, labels }, rules }
    : { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: roleName, namespace: request.namespace, labels }, rules };
  const binding = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: {
      name: useBindingName(request.credSpec, { kind: "ServiceAccount", namespace: request.namespace, name: request.serviceAccount }),
      namespace: request.namespace,
      labels,
    },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: role.kind, name: roleName },
    subjects: [{ kind: "ServiceAccount", name: request.serviceAccount, namespace: request.namespace }],
  };
  return [role, binding];
}
