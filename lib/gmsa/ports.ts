/**
 * What the GMSA policy needs from a cluster, and nothing more. The Kubernetes adapter in
 * lib/kube implements these; tests hand in fakes.
 */

/**
 * What travels with every call a port makes for an admission: the admission's deadline, and the
 * namespace it is for. Whoever shares a cluster's API calls out fairly (the Kubernetes adapter)
 * queues and bounds them by that namespace, whichever port a call comes through.
 */
export interface PortCall {
  /** Aborts when the admission's time budget is spent. */
  readonly signal: AbortSignal;
  /** The admission's namespace. A call of none is bounded as one more namespace, "". */
  readonly namespace?: string;
}

/**
 * The calls of work that several admissions share (an access review asked once for all who ask it
 * at the same time), each of which already counts as waiting on the API server by itself, for its
 * own namespace, while it waits. The work's own calls are not counted again: counted, each would
 * be one more admission, and one namespace's pods naming many specs while the server is slow
 * would fill the bound on all namespaces together. They still wait for a slot in their
 * namespace's turn. Only `sharedWorkCall` makes such a call: no other object, however built or
 * copied, skips the bound.
 */
const sharedWorkCalls = new WeakSet<PortCall>();

export function sharedWorkCall(signal: AbortSignal, namespace: string): PortCall {
  const call: PortCall = Object.freeze({ signal, namespace });
  sharedWorkCalls.add(call);
  return call;
}

export function isSharedWorkCall(call: PortCall): boolean {
  return sharedWorkCalls.has(call);
}

const spareSlotCalls = new WeakMap<PortCall, () => boolean>();

/**
 * Work no admission waits on (a `use` answer asked again ahead of its expiry): like
 * sharedWorkCall it holds nothing, and while `unwaited()` says no admission waits on it, it gets
 * an API slot only when one is free at once, never a place in the queue, so it cannot make an
 * admission wait. Once admissions wait on it, it queues in its namespace's turn like any work they
 * share. Only this function makes such a call.
 */
export function spareSlotCall(signal: AbortSignal, namespace: string, unwaited: () => boolean): PortCall {
  const call = sharedWorkCall(signal, namespace);
  spareSlotCalls.set(call, unwaited);
  return call;
}

/** Whether the call may take only a free slot now: work made by spareSlotCall that no admission waits on yet. */
export function isSpareSlotCall(call: PortCall): boolean {
  return spareSlotCalls.get(call)?.() ?? false;
}

export type CredSpecLookup =
  | { readonly kind: "found"; readonly credspec: Readonly<Record<string, unknown>> }
  | { readonly kind: "notFound" }
  | { readonly kind: "noCredspec" }
  | { readonly kind: "tooLarge" };

export interface CredSpecSource {
  /** Reads the named GMSACredentialSpec. Throws ClusterUnavailableError when the cluster cannot answer. */
  lookup(name: string, call: PortCall): Promise<CredSpecLookup>;
  /**
   * Every credential spec's name, when the source knows them without asking the API server (a
   * synced, current watch); undefined otherwise. Used only to suggest names on a denial.
   */
  knownNames?(): readonly string[] | undefined;
}

/** Who is asking to use a credential spec: a service account or the requesting user. */
export interface Principal {
  readonly user: string;
  readonly groups: readonly string[];
  readonly uid?: string;
  readonly extra?: Readonly<Record<string, readonly string[]>>;
  /** A service account is checked in its namespace (LocalSubjectAccessReview). */
  readonly serviceAccount?: { readonly namespace: string; readonly name: string };
}

export type UseDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason?: string };

export interface UseAuthorizer {
  /** May `principal` `use` the named credential spec for a pod in `namespace`? */
  mayUse(principal: Principal, namespace: string, credSpecName: string, call: PortCall): Promise<UseDecision>;
}

/**
 * Principals the policy shares between admissions: frozen all the way down, plain data, made
 * only by `sharedPrincipal`. Whoever keys answers by principal may remember such a principal's
 * key by identity; any other principal could change after it was seen.
 */
const sharedPrincipals = new WeakSet<Principal>();

export function sharedPrincipal(principal: Principal): Principal {
  const shared: Principal = Object.freeze({
    user: principal.user,
    groups: Object.freeze([...principal.groups]),
    ...(principal.uid !== undefined ? { uid: principal.uid } : {}),
    ...(principal.extra !== undefined
      ? { extra: Object.freeze(Object.fromEntries(Object.entries(principal.extra).map(([key, values]) => [key, Object.freeze([...values])]))) }
      : {}),
    ...(principal.serviceAccount !== undefined ? { serviceAccount: Object.freeze({ namespace: principal.serviceAccount.namespace, name: principal.serviceAccount.name }) } : {}),
  });
  sharedPrincipals.add(shared);
  return shared;
}

export function isSharedPrincipal(principal: Principal): boolean {
  return sharedPrincipals.has(principal);
}

export function serviceAccountPrincipal(namespace: string, name: string): Principal {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
    serviceAccount: { namespace, name },
  };
}
