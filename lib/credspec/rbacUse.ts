import * as t from "io-ts";

/**
 * Who RBAC lets `use` one credential spec, read from the objects themselves: Roles,
 * ClusterRoles (an aggregated ClusterRole's rules are the ones the controller manager has filled
 * in, so they are read like any other), and their bindings. Wildcards in verbs, API groups,
 * resources and an absent resourceNames all count. The answer is what the rules say; the command
 * then confirms each service account with an access review, since an authorizer other than RBAC
 * may also have a say.
 */
const PolicyRule = t.intersection([
  t.type({ verbs: t.array(t.string) }),
  t.partial({ apiGroups: t.array(t.string), resources: t.array(t.string), resourceNames: t.array(t.string) }),
]);

const Metadata = t.intersection([t.type({ name: t.string }), t.partial({ namespace: t.string })]);

export const RbacRole = t.intersection([t.type({ metadata: Metadata }), t.partial({ rules: t.union([t.array(PolicyRule), t.null]) })]);
export type RbacRole = t.TypeOf<typeof RbacRole>;

const Subject = t.intersection([t.type({ kind: t.string, name: t.string }), t.partial({ namespace: t.string })]);
export type RbacSubject = t.TypeOf<typeof Subject>;

export const RbacBinding = t.intersection([
  t.type({ metadata: Metadata, roleRef: t.type({ kind: t.string, name: t.string }) }),
  t.partial({ subjects: t.union([t.array(Subject), t.null]) }),
]);
export type RbacBinding = t.TypeOf<typeof RbacBinding>;

export const RbacList = <C extends t.Mixed>(item: C) => t.type({ items: t.array(item) });

export interface RbacObjects {
  readonly clusterRoles: readonly RbacRole[];
  readonly roles: readonly RbacRole[];
  readonly clusterRoleBindings: readonly RbacBinding[];
  readonly roleBindings: readonly RbacBinding[];
}

export interface UseGrantFound {
  readonly subject: RbacSubject;
  /** The namespace the grant holds in; undefined for every namespace. */
  readonly namespace?: string;
  /** The binding and role it comes through, as `RoleBinding ns/name -> ClusterRole name`. */
  readonly via: string;
}

const matches = (values: readonly string[] | undefined, wanted: string) => values !== undefined && (values.includes("*") || values.includes(wanted));

export function rulesGrantUse(rules: RbacRole["rules"], credSpec: string): boolean {
  return (rules ?? []).some(
    (rule) =>
      matches(rule.verbs, "use") &&
      matches(rule.apiGroups, "windows.k8s.io") &&
      matches(rule.resources, "gmsacredentialspecs") &&
      (rule.resourceNames === undefined || rule.resourceNames.length === 0 || rule.resourceNames.includes(credSpec)),
  );
}

/** Every subject some binding lets `use` the spec; with `namespace`, only grants that hold there. */
export function whoMayUse(rbac: RbacObjects, credSpec: string, namespace?: string): UseGrantFound[] {
  const clusterRoleGrants = new Set(rbac.clusterRoles.filter((r) => rulesGrantUse(r.rules, credSpec)).map((r) => r.metadata.name));
  const roleGrants = new Set(rbac.roles.filter((r) => rulesGrantUse(r.rules, credSpec)).map((r) => `${r.metadata.namespace}/${r.metadata.name}`));
  const found: UseGrantFound[] = [];
  for (const binding of rbac.clusterRoleBindings) {
    if (binding.roleRef.kind !== "ClusterRole" || !clusterRoleGrants.has(binding.roleRef.name)) continue;
    for (const subject of binding.subjects ?? []) found.push({ subject, via: `ClusterRoleBinding ${binding.metadata.name} -> ClusterRole ${binding.roleRef.name}` });
  }
  for (const binding of rbac.roleBindings) {
    const bindingNamespace = binding.metadata.namespace ?? "";
    if (namespace !== undefined && bindingNamespace !== namespace) continue;
    const grants =
      binding.roleRef.kind === "ClusterRole"
        ? clusterRoleGrants.has(binding.roleRef.name)
        : binding.roleRef.kind === "Role" && roleGrants.has(`${bindingNamespace}/${binding.roleRef.name}`);
    if (!grants) continue;
    for (const subject of binding.subjects ?? []) {
      // A service account subject of a RoleBinding without a namespace is the binding's own.
      const resolved = subject.kind === "ServiceAccount" && !subject.namespace ? { ...subject, namespace: bindingNamespace } : subject;
      found.push({
        subject: resolved,
        namespace: bindingNamespace,
        via: `RoleBinding ${bindingNamespace}/${binding.metadata.name} -> ${binding.roleRef.kind} ${binding.roleRef.name}`,
      });
    }
  }
  return found;
}
