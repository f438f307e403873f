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
 * The advice a 403 carries: the product's command and the plain kubectl equivalent. It names
 * only what the refused pod already names (its namespace, its service account, the credential
 * spec), so it tells the caller nothing about the cluster, not even whether the spec exists.
 */
export function useGrantAdvice(credSpec: string, namespace: string, grantee: UseGrantee): string {
  const role = useRoleName(credSpec);
  const createRole = `kubectl create role ${role} --namespace=${namespace} --verb=use --resource=${useGrantResource} --resource-name=${credSpec}`;
  const who = grantee.kind === "ServiceAccount" ? `--serviceaccount=${grantee.namespace}:${grantee.name}` : `--user=${grantee.name}`;
  const createBinding = `kubectl create rolebinding ${useBindingName(credSpec, grantee)} --namespace=${namespace} --role=${role} ${who}`;
  const tool = grantee.kind === "ServiceAccount" ? `npm run credspec -- grant ${credSpec} --service-account ${grantee.namespace}/${grantee.name} --apply, or ` : "";
  return `to grant it: ${tool}${createRole} && ${createBinding}`;
}
