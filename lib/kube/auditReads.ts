import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { auditCluster, type AuditFinding, type StoredCredSpec } from "../credspec/audit.js";
import { decodePodObject, gmsaSettings } from "../gmsa/pod.js";
import { relayNamespaceOf } from "../credspec/auditWiring.js";
import { RbacBinding, RbacList, RbacRole } from "../credspec/rbacUse.js";
import { heldBytes, jsonCopy, nestedDeeperThan, parsedFromLonger } from "../jsonSize.js";
import type { ApiServerConnection } from "./apiServerConnection.js";
import { maxListPageBytes } from "./credSpecCache.js";
import { lookupFromObject } from "./credSpecApi.js";
import { credSpecCrdName } from "../wiring/credSpecCrd.js";
import { safetyNetPolicyNames } from "../wiring/safetyNetNames.js";
import { webhookConfigurationName } from "../wiring/webhooks.js";

/**
 * The credential spec audit of one cluster, read over one connection: every list it needs, page
 * by page, each call counted. Read-only. The function's timer reads with its own identity, which
 * needs the audit's role (cluster/auditRbac.ts); `npm run credspec -- audit` with the kubeconfig's.
 */
export interface ClusterAudit {
  readonly findings: readonly AuditFinding[];
  /** API calls this audit made (list pages): what it costs the API server each run. */
  readonly apiCalls: number;
  /** What it read: the credential specs and the pods. */
  readonly read: { readonly credSpecs: number; readonly pods: number };
}

const Page = t.intersection([t.type({ items: t.array(t.unknown) }), t.partial({ metadata: t.partial({ continue: t.string }) })]);
const Named = t.type({ metadata: t.type({ name: t.string }) });

/** The identity may not list what the audit reads. */
class ListForbiddenError extends Error {
  constructor(what: string) {
    super(`this identity may not list ${what}: the audit needs list on pods, RBAC objects and NetworkPolicies (for the function's identity: npm run wire -- --audit)`);
    this.name = "ListForbiddenError";
  }
}

export interface AuditOptions {
  readonly randomHostname: boolean;
  readonly signal: AbortSignal;
  /**
   * The most memory what the audit keeps of the credential specs, and of the pods that name one,
   * may take (heldBytes), as the cache's bound (GMSA_CREDSPEC_CACHE_MAX_BYTES): past it the audit
   * stops. Default 64 MiB.
   */
  readonly maxKeptBytes?: number;
  /** The Function App's own host name, where URL-wired webhooks should call it; none: not judged. */
  readonly functionHost?: string;
}

/** Objects asked for per list page. */
const pageSize = 100;
/** A page of 100 pods, whose objects are larger than specs and roles. */
const maxPodPageBytes = 16 * 1024 * 1024;
/** What the audit keeps is copied, recursively: a pod nests about a dozen levels. */
const maxKeptDepth = 64;
/** Pages with nothing in them but a token for more, in a row, that end a list. */
const maxEmptyPages = 10;

export async function auditOverConnection(connection: ApiServerConnection, options: AuditOptions): Promise<ClusterAudit> {
  let apiCalls = 0;
  /** Every object of a list, as `keep` keeps it (undefined: not at all), in pages of at most `maxPageBytes`. */
  const list = async (path: string, what: string, keep: (item: unknown) => unknown, maxPageBytes = maxListPageBytes): Promise<unknown[]> => {
    const items: unknown[] = [];
    let next: string | undefined;
    // A page longer than it may be is asked for again, half as long, down to one object: a cluster
    // of large objects (pods with long annotations) is read in smaller pages, not refused.
    let limit = pageSize;
    // A server that hands out a token twice, or pages of nothing without end, would be asked for ever.
    const given = new Set<string>();
    let emptyPages = 0;
    for (;;) {
      apiCalls += 1;
      const query = new URLSearchParams({ limit: String(limit), ...(next ? { continue: next } : {}) });
      const reply = await connection.send({ method: "GET", path: `${path}?${query}`, signal: options.signal, maxBodyBytes: maxPageBytes });
      if (reply.status === 403) throw new ListForbiddenError(what);
      if (reply.tooLarge && reply.status === 200) {
        if (limit > 1) {
          limit = Math.ceil(limit / 2);
          continue;
        }
        throw new Error(`one of the list of ${what} is larger than ${maxPageBytes} bytes, more than a page of them takes`);
      }
      if (reply.status !== 200) throw new Error(`listing ${what} was answered ${reply.status}`);
      const page = Page.decode(reply.body);
      if (isLeft(page)) throw new Error(`the API server's list of ${what} is not a list`);
      if (reply.bytes !== undefined && parsedFromLonger(reply.bytes, reply.body)) {
        throw new Error(`a page of the list of ${what} parsed into much less than its ${reply.bytes} bytes (a key given twice?)`);
      }
      for (const item of page.right.items) {
        const kept = keep(item);
        if (kept !== undefined) items.push(kept);
      }
      next = page.right.metadata?.continue || undefined;
      if (!next) return items;
      if (given.has(next)) throw new Error(`the API server's list of ${what} gave the same continue token twice`);
      given.add(next);
      emptyPages = page.right.items.length === 0 ? emptyPages + 1 : 0;
      if (emptyPages >= maxEmptyPages) throw new Error(`the API server's list of ${what} sent ${maxEmptyPages} pages in a row with nothing in them`);
    }
  };
  // The credential specs are read as the cache reads them (pages of 100, at most maxListPageBytes
  // each), and of each only its name and contents are kept, counted against a bound: a cluster's
  // specs, shaped to take many times their JSON in memory, must not exhaust the instance that
  // every cluster it serves shares. A spec larger than admission reads is kept as its name.
  // Pods likewise: of each page only those that name a credential spec, the only ones audited.
  const maxKeptBytes = options.maxKeptBytes ?? 64 * 1024 * 1024;
  let keptBytes = 0;
  const counted = <A>(kept: A): A => {
    keptBytes += heldBytes(kept);
    if (keptBytes > maxKeptBytes) {
      throw new Error(`the cluster's credential specs and the pods that name them take more than ${maxKeptBytes} bytes of memory; the audit reads no further`);
    }
    return kept;
  };
  // A copy, not what JSON.parse made (lib/jsonSize.ts jsonCopy), counted; copying recurses, so
  // nothing deeper than any object the audit reads is copied.
  const keptCopy = (value: unknown, what: string): unknown => {
    if (nestedDeeperThan(value, maxKeptDepth)) throw new Error(`the API server listed ${what} nested more than ${maxKeptDepth} levels deep`);
    return counted(jsonCopy(value));
  };
  const keepCredSpec = (item: unknown): unknown => {
    if (!Named.is(item)) return undefined;
    const name = item.metadata.name;
    const lookup = lookupFromObject(item);
    if (lookup.kind === "tooLarge") return counted({ name, credspec: undefined, tooLarge: true });
    // Copies, as the cache keeps them; the object passed credSpecSize.ts, so the copy is shallow enough.
    return counted({ name, credspec: lookup.kind === "found" ? lookup.credspec : jsonCopy((item as { credspec?: unknown }).credspec) });
  };
  let podsRead = 0;
  const keepGmsaPod = (item: unknown): unknown => {
    podsRead += 1;
    // A list's items carry no kind of their own, and a pod is read as one only with it.
    const pod = item !== null && typeof item === "object" ? { apiVersion: "v1", kind: "Pod", ...item } : item;
    const decoded = decodePodObject(pod);
    if (isLeft(decoded) || !gmsaSettings(decoded.right, decoded.right.metadata?.name ?? undefined).some((s) => s.name !== undefined)) return undefined;
    return keptCopy(pod, "a pod");
  };
  // Of roles and bindings, what lib/credspec/rbacUse.ts reads: the rules that could grant `use`,
  // and who a binding binds to which role.
  const keepRole = (item: unknown): unknown => {
    const role = RbacRole.decode(item);
    if (isLeft(role)) throw new Error("the API server listed a role that is not one");
    const { name, namespace } = role.right.metadata;
    const rules = (role.right.rules ?? []).filter((rule) => rule.verbs.includes("use") || rule.verbs.includes("*"));
    return keptCopy({ metadata: { name, ...(namespace === undefined ? {} : { namespace }) }, rules }, "a role");
  };
  const keepBinding = (item: unknown): unknown => {
    const binding = RbacBinding.decode(item);
    if (isLeft(binding)) throw new Error("the API server listed a role binding that is not one");
    const { name, namespace } = binding.right.metadata;
    const { kind, name: roleName } = binding.right.roleRef;
    return keptCopy(
      { metadata: { name, ...(namespace === undefined ? {} : { namespace }) }, roleRef: { kind, name: roleName }, subjects: binding.right.subjects ?? [] },
      "a role binding",
    );
  };
  const decoded = <A>(codec: t.Decoder<unknown, A>, items: unknown[], what: string): A => {
    const result = codec.decode({ items });
    if (isLeft(result)) throw new Error(`the API server's list of ${what} is not as expected`);
    return result.right;
  };
  // One of the product's own objects, by name: undefined where the cluster has none. One this
  // identity may not read (a role from before the audit read the wiring) is named, and the rest of
  // the audit goes on.
  const unreadable: string[] = [];
  const read = async (path: string, what: string): Promise<unknown> => {
    apiCalls += 1;
    const reply = await connection.send({ method: "GET", path, signal: options.signal });
    if (reply.status === 404) return undefined;
    if (reply.status === 403) {
      unreadable.push(what);
      return undefined;
    }
    if (reply.status !== 200) throw new Error(`reading ${what} was answered ${reply.status}`);
    return reply.body;
  };
  const admissionRegistration = "/apis/admissionregistration.k8s.io/v1";
  const byName = async (resource: string, kind: string) =>
    Object.fromEntries(await Promise.all(safetyNetPolicyNames.map(async (name) => [name, await read(`${admissionRegistration}/${resource}/${name}`, `${kind} ${name}`)] as const)));
  const rbac = "/apis/rbac.authorization.k8s.io/v1";
  const [specs, clusterRoles, roles, clusterRoleBindings, roleBindings, pods, mutating, validating, crd, policies, bindings] = await Promise.all([
    list("/apis/windows.k8s.io/v1/gmsacredentialspecs", "GMSACredentialSpecs", keepCredSpec),
    list(`${rbac}/clusterroles`, "ClusterRoles", keepRole),
    list(`${rbac}/roles`, "Roles", keepRole),
    list(`${rbac}/clusterrolebindings`, "ClusterRoleBindings", keepBinding),
    list(`${rbac}/rolebindings`, "RoleBindings", keepBinding),
    list("/api/v1/pods", "pods", keepGmsaPod, maxPodPageBytes),
    read(`${admissionRegistration}/mutatingwebhookconfigurations/${webhookConfigurationName}`, `MutatingWebhookConfiguration ${webhookConfigurationName}`),
    read(`${admissionRegistration}/validatingwebhookconfigurations/${webhookConfigurationName}`, `ValidatingWebhookConfiguration ${webhookConfigurationName}`),
    read(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${credSpecCrdName}`, `CustomResourceDefinition ${credSpecCrdName}`),
    byName("validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
    byName("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
  ]);
  // Relay wiring: who may reach the relay the webhooks call. A role from before the audit read
  // them may not list NetworkPolicies: named like the other objects it may not read, and the
  // credential specs are still audited.
  const relayNamespace = relayNamespaceOf([mutating, validating]);
  let relay: { namespace: string; networkPolicies: unknown[] } | undefined;
  if (relayNamespace !== undefined) {
    const what = `NetworkPolicies in namespace ${relayNamespace}`;
    const networkPolicies = await list(`/apis/networking.k8s.io/v1/namespaces/${encodeURIComponent(relayNamespace)}/networkpolicies`, what, (item) =>
      keptCopy(item, "a NetworkPolicy"),
    ).catch((error: unknown) => {
      if (error instanceof ListForbiddenError) {
        unreadable.push(what);
        return undefined;
      }
      throw error;
    });
    if (networkPolicies !== undefined) relay = { namespace: relayNamespace, networkPolicies };
  }
  const findings = auditCluster({
    credSpecs: specs.filter((spec): spec is StoredCredSpec => typeof spec === "object" && spec !== null && typeof (spec as { name?: unknown }).name === "string"),
    rbac: {
      clusterRoles: decoded(RbacList(RbacRole), clusterRoles, "ClusterRoles").items,
      roles: decoded(RbacList(RbacRole), roles, "Roles").items,
      clusterRoleBindings: decoded(RbacList(RbacBinding), clusterRoleBindings, "ClusterRoleBindings").items,
      roleBindings: decoded(RbacList(RbacBinding), roleBindings, "RoleBindings").items,
    },
    pods,
    randomHostname: options.randomHostname,
    wiring: {
      mutating,
      validating,
      crd,
      policies,
      bindings,
      ...(relay ? { relay } : {}),
      ...(unreadable.length > 0 ? { unreadable: unreadable.sort() } : {}),
      ...(options.functionHost ? { functionHost: options.functionHost } : {}),
    },
  });
  return { findings, apiCalls, read: { credSpecs: specs.length, pods: podsRead } };
}
