import { serviceAccountOf } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { serviceAccountPrincipal, sharedPrincipal, type Principal } from "./ports.js";
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
 *
 * On an UPDATE the account is the one the pod runs as, read from the old object: a running pod's
 * account cannot change, but the object a caller sends may name another. Through
 * `pods/ephemeralcontainers` the API server puts back everything but the ephemeral containers only
 * after mutating admission, so the new object's account would have had contents inlined for an
 * account the pod never runs as.
 */
export function usePrincipals(admission: PodAdmission, deps: PolicyDependencies): { principals: UsePrincipal[] } | { problem: string } {
  const runsAs = admission.operation === "UPDATE" && admission.oldPod ? admission.oldPod : admission.pod;
  const principals: UsePrincipal[] = [accountPrincipal(admission.namespace, serviceAccountOf(runsAs))];
  if (deps.settings.authorizeRequestingUser) {
    const user = admission.userInfo;
    if (!user?.username) return { problem: "the request names no user to authorize" };
    // The access review's client writes `extra` key by key into a plain object, where this key
    // would set the prototype instead: the review would ask about a user without it.
    if (user.extra !== undefined && Object.hasOwn(user.extra, "__proto__")) return { problem: 'the requesting user\'s extra attribute "__proto__" cannot be asked about' };
    principals.push({
      principal: { user: user.username, groups: user.groups ?? [], uid: user.uid, extra: user.extra },
      description: `user "${user.username}"`,
      grantee: { kind: "User", name: user.username },
    });
  }
  return { principals };
}

/**
 * The service account principals of recent pods, by namespace and name, made once and shared
 * (`sharedPrincipal`): most admissions come from a few service accounts, and the decision cache
 * keys a principal it has seen before without writing it out again. Only names as long as
 * Kubernetes allows are kept (anyone who reaches the webhook can send a made-up review, and a
 * name of a megabyte must not outlive its admission), at most `maxAccountPrincipals` of them;
 * past that they are all dropped and made afresh.
 */
const accountPrincipals = new Map<string, Map<string, UsePrincipal>>();
const maxAccountPrincipals = 1024;
const maxNamespaceLength = 63;
const maxAccountLength = 253;
let accountPrincipalCount = 0;

function accountPrincipal(namespace: string, account: string): UsePrincipal {
  let inNamespace = accountPrincipals.get(namespace);
  const known = inNamespace?.get(account);
  if (known) return known;
  const made: UsePrincipal = {
    principal: serviceAccountPrincipal(namespace, account),
    description: `service account "${account}" in namespace "${namespace}"`,
    grantee: { kind: "ServiceAccount", namespace, name: account },
  };
  if (namespace.length > maxNamespaceLength || account.length > maxAccountLength) return made;
  if (accountPrincipalCount >= maxAccountPrincipals) {
    accountPrincipals.clear();
    accountPrincipalCount = 0;
    inNamespace = undefined;
  }
  const kept: UsePrincipal = Object.freeze({ principal: sharedPrincipal(made.principal), description: made.description, grantee: Object.freeze(made.grantee) });
  if (!inNamespace) accountPrincipals.set(namespace, (inNamespace = new Map()));
  inNamespace.set(account, kept);
  accountPrincipalCount += 1;
  return kept;
}

/**
 * The first name, in the order given, that some principal may not `use`, with that principal;
 * and the names confirmed usable before it. Names are judged in small batches, in order, and
 * judging stops at the first batch with a refusal: a pod of made-up names costs one access
 * review rather than one per name, so one principal cannot fill the API server's slots with
 * questions whose answer is already known to be a refusal. The first name goes alone (most
 * pods name one spec, and a made-up first name ends it there); later batches of four keep a
 * pod of many usable names to a few round trips, and cost at most three wasted reviews after
 * a refusal.
 */
export async function firstRefusal(
  names: readonly string[],
  principals: readonly UsePrincipal[],
  namespace: string,
  deps: PolicyDependencies,
): Promise<{ readonly confirmed: readonly string[]; readonly refused?: { readonly name: string; readonly by: UsePrincipal } }> {
  const confirmed: string[] = [];
  for (const batch of inBatches(names)) {
    const refused = await refusedUse(batch, principals, namespace, deps);
    for (const name of batch) {
      const by = refused.get(name);
      if (by) return { confirmed, refused: { name, by } };
      confirmed.push(name);
    }
  }
  return { confirmed };
}

const firstBatchSize = 1;
const laterBatchSize = 4;

function inBatches(names: readonly string[]): string[][] {
  const batches: string[][] = [];
  for (let start = 0; start < names.length;) {
    const size = start === 0 ? firstBatchSize : laterBatchSize;
    batches.push(names.slice(start, start + size));
    start += size;
  }
  return batches;
}

/**
 * For each name, the first principal that may not `use` it; names every principal may use are
 * absent. Every name is asked about at once: only for a short list (suggestions); a pod's names
 * go through firstRefusal.
 */
export async function refusedUse(names: readonly string[], principals: readonly UsePrincipal[], namespace: string, deps: PolicyDependencies): Promise<Map<string, UsePrincipal>> {
  const decisions = await Promise.all(names.map((name) => Promise.all(principals.map((p) => deps.authorizer.mayUse(p.principal, namespace, name, deps.call)))));
  const refused = new Map<string, UsePrincipal>();
  names.forEach((name, i) => {
    const by = decisions[i]!.findIndex((d) => !d.allowed);
    if (by >= 0) refused.set(name, principals[by]!);
  });
  return refused;
}
