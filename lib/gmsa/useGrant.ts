/**
 * How `use` of one credential spec is granted: the names of the Role (or ClusterRole) and the
 * binding, and the commands that create them. The grant command and a 403's advice share these,
 * so what the advice says is what the command does.
 */
export const useGrantResource = "gmsacredentialspecs.windows.k8s.io";

export type UseGrantee = { readonly kind: "ServiceAccount"; readonly namespace: string; readonly name: string } | { readonly kind: "User"; readonly name: string };

export function useRoleName(credSpec: string): string {
  return `gmsa-use-${credSpec}`;
}

export function useBindingName(credSpec: string, grantee: UseGrantee): string {
  return grantee.kind === "ServiceAccount" ? `gmsa-use-${credSpec}-${grantee.name}` : `gmsa-use-${credSpec}-user`;
}

/**
 * The advice a 403 carries: the product's command, and what it makes, in words an operator can
 * turn into YAML (kubectl create role refuses the verb use on any resource but a handful it knows,
 * so no kubectl one-liner can make this Role). It names only what the refused pod already names
 * (its namespace, its service account or user, the credential spec), so it tells the caller
 * nothing about the cluster, not even whether the spec exists.
 */
export function useGrantAdvice(credSpec: string, namespace: string, grantee: UseGrantee): string {
  const role = useRoleName(credSpec);
  const made = `a Role ${role} in namespace ${namespace} with the verb use on ${useGrantResource}, resourceNames [${credSpec}], and a RoleBinding ${useBindingName(credSpec, grantee)} of it to`;
  if (grantee.kind === "ServiceAccount") {
    return `to grant it: npm run credspec -- grant ${credSpec} --service-account ${grantee.namespace}/${grantee.name} --apply (${made} the service account)`;
  }
  return `to grant it: ${made} user ${grantee.name} (as YAML: kubectl create role does not take the verb use)`;
}
