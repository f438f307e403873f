import type { KubernetesObject } from "../../cluster/manifests.js";

/**
 * RBAC that lets workloads `use` credential specs, as a workload team would write it: a role
 * naming the specs (all of them when none are named) and a binding in the pod's namespace to a
 * service account or a group.
 */
export function useGrant(options: {
  name: string;
  namespace: string;
  credSpecs?: string[];
  serviceAccount?: string;
  group?: string;
  /** A namespaced Role instead of a ClusterRole. */
  namespacedRole?: boolean;
}): KubernetesObject[] {
  const roleKind = options.namespacedRole ? "Role" : "ClusterRole";
  const subject = options.group
    ? { kind: "Group", name: options.group, apiGroup: "rbac.authorization.k8s.io" }
    : { kind: "ServiceAccount", name: options.serviceAccount ?? "default", namespace: options.namespace };
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: roleKind,
      metadata: { name: options.name, ...(options.namespacedRole ? { namespace: options.namespace } : {}) },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], ...(options.credSpecs ? { resourceNames: options.credSpecs } : {}), verbs: ["use"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: options.name, namespace: options.namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: roleKind, name: options.name },
      subjects: [subject],
    },
  ];
}
