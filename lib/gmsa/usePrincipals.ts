import { serviceAccountOf } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { serviceAccountPrincipal, type Principal } from "./ports.js";
import type { UseGrantee } from "./useGrant.js";

/** A principal that must hold `use`, with how it reads in a denial. */
export interface UsePrincipal {
  readonly principal: Principal;
  readonly description: string;
  /** Who a grant of `use` would name, for the advice in a denial. */
  readonly grantee: UseGrantee;
}

/**
 * Who must hold `use` on every credential spec a pod names: its service account, and the
 * requesting user when that check is on. Mutation and validation ask the same questions, so the
 * decision cache answers the second from the first.
 */
export function usePrincipals(admission: PodAdmission, deps: PolicyDependencies): { principals: UsePrincipal[] } | { problem: string } {
  const account = serviceAccountOf(admission.pod);
  const principals: UsePrincipal[] = [
    {
      principal: serviceAccountPrincipal(admission.namespace, account),
      description: `service account "${account}" in namespace "${admission.namespace}"`,
      grantee: { kind: "ServiceAccount", namespace: admission.namespace, name: account },
    },
  ];
  if (deps.settings.authorizeRequestingUser) {
    const user = admission.userInfo;
    if (!user?.username) return { problem: "the request names no user to authorize" };
    principals.push({
      principal: { user: user.username, groups: user.groups ?? [], uid: user.uid, extra: user.extra },
      description: `user "${user.username}"`,
      grantee: { kind: "User", name: user.username },
    });
  }
  return { principals };
}

/**
 * For each name, the first principal that may not `use` it; names every principal may use are
 * absent. Only these answers decide what happens next: nothing is looked up for a refused name.
 */
export async function refusedUse(
  names: readonly string[],
  principals: readonly UsePrincipal[],
  namespace: string,
  deps: PolicyDependencies,
): Promise<Map<string, UsePrincipal>> {
  const answers = await Promise.all(
    names.map(async (name) => {
      const decisions = await Promise.all(principals.map((p) => deps.authorizer.mayUse(p.principal, namespace, name, deps.signal)));
      const refused = decisions.findIndex((d) => !d.allowed);
      return [name, refused < 0 ? undefined : principals[refused]] as const;
    }),
  );
  return new Map(answers.flatMap(([name, who]) => (who ? [[name, who] as const] : [])));
}
