import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { clusterSecretHeader } from "./memberIdentity.js";

/**
 * Which member a webhook request is for, and whether it may speak for it. In fleet mode a
 * request names its cluster in the path and proves it comes from that cluster's wiring with the
 * member's secret: in a header (the relay adds it) or as a path segment (url wiring, where the
 * API server sends no header of its own choosing). A function key is valid for every route, so
 * it cannot tell clusters apart; the secret can.
 */

/** How a request addressed its cluster, as its route says. */
export type MemberAddress =
  /** Today's paths: /mutate, /validate, /validate-credspec. */
  | { readonly kind: "top" }
  /** /clusters/{cluster}/<webhook>, the secret in the x-gmsa-cluster-secret header. */
  | { readonly kind: "header"; readonly cluster: string; readonly secret: string | null }
  /** /clusters/{cluster}/{secret}/<webhook>. */
  | { readonly kind: "path"; readonly cluster: string; readonly secret: string };

export { clusterSecretHeader };

export type MemberRoute<M> =
  | { readonly ok: true; readonly member: M }
  | {
      readonly ok: false;
      readonly status: 401 | 404 | 503;
      /** For the caller: says nothing about other members or secrets. */
      readonly message: string;
      /** For the log, when the refusal is worth an operator's attention. */
      readonly warning?: string;
    };

export interface FleetRouter<M> {
  route(address: MemberAddress, webhook: string): MemberRoute<M>;
}

/** A member to route to, or one kept out of service by its own settings (`unavailable`: why, for the log only). */
export type RoutedMember<M> =
  { readonly name: string; readonly secrets: readonly string[]; readonly member: M } | { readonly name: string; readonly secrets: readonly string[]; readonly unavailable: string };

interface Entry<M> {
  readonly name: string;
  readonly digests: readonly Buffer[];
  /** The member, or why it is out of service. */
  readonly accepted: { readonly ok: true; readonly member: M } | { readonly ok: false; readonly reason: string };
}

// Both sides are hashed before they are compared, so the comparison takes the same time
// whatever the lengths, and a caller learns nothing from how long a refusal took.
const digest = (value: string): Buffer => createHash("sha256").update(value, "utf8").digest();

function matchesAny(given: Buffer, digests: readonly Buffer[]): boolean {
  let matched = false;
  // Every secret is compared, so which one matched (new or old) does not show in the time taken.
  for (const candidate of digests) matched = timingSafeEqual(given, candidate) || matched;
  return matched;
}

/**
 * `single`: one member on today's paths, no secret; the /clusters/… paths are not served.
 * `fleet`: the members by name; today's paths are not served.
 */
export function fleetRouter<M>(mode: "single" | "fleet", members: readonly RoutedMember<M>[]): FleetRouter<M> {
  const byName = new Map<string, Entry<M>>(
    members.map((m) => [m.name, { name: m.name, digests: m.secrets.map(digest), accepted: "member" in m ? { ok: true, member: m.member } : { ok: false, reason: m.unavailable } }]),
  );
  const only = mode === "single" ? members[0] : undefined;
  if (mode === "single" && (members.length !== 1 || only === undefined || !("member" in only))) throw new RangeError("a single-cluster app has exactly one member");
  if (mode === "fleet" && members.some((m) => "member" in m && m.secrets.length === 0)) throw new RangeError("every fleet member needs a secret");
  const single: MemberRoute<M> | undefined = only && "member" in only ? { ok: true, member: only.member } : undefined;
  const notServed: MemberRoute<M> = {
    ok: false,
    status: 404,
    message: single ? "this app serves one cluster, on /mutate, /validate and /validate-credspec" : "this app serves a fleet: use /clusters/{name}/...",
  };
  const unknown: MemberRoute<M> = { ok: false, status: 404, message: "no such cluster" };

  return {
    route(address, webhook) {
      if (single) return address.kind === "top" ? single : notServed;
      if (address.kind === "top") return notServed;
      const entry = byName.get(address.cluster);
      // Before anything else: no secret is looked at and no client is started for a name the
      // app does not serve.
      if (entry === undefined) return unknown;
      // Out of service with no usable secret: there is nothing to check a request against, and
      // nothing it could learn; it is answered without its body being read.
      if (!entry.accepted.ok && entry.digests.length === 0) return outOfService(entry.name, webhook, entry.accepted.reason);
      if (address.secret === null || address.secret === "") {
        return {
          ok: false,
          status: 401,
          message: "a cluster secret is required",
          warning: refusal(entry.name, webhook, `no cluster secret (${address.kind === "header" ? `header ${clusterSecretHeader}` : "path"})`),
        };
      }
      const given = digest(address.secret);
      if (matchesAny(given, entry.digests)) return entry.accepted.ok ? entry.accepted : outOfService(entry.name, webhook, entry.accepted.reason);
      // For the operator only: a member's wiring pointed at another member's paths.
      let owner: string | undefined;
      for (const other of byName.values()) if (other !== entry && matchesAny(given, other.digests)) owner = other.name;
      const what = owner === undefined ? "a cluster secret that matches no member" : `the secret of cluster "${owner}": request for "${entry.name}" carried "${owner}"'s secret`;
      return { ok: false, status: 401, message: "the cluster secret does not match", warning: refusal(entry.name, webhook, what) };
    },
  };
}

/**
 * A member kept out of service by its own settings: the caller is told so in plain words with a
 * correlation ID, the operator the reason under the same ID.
 */
function outOfService<M>(cluster: string, webhook: string, reason: string): MemberRoute<M> {
  const correlationId = randomUUID();
  return {
    ok: false,
    status: 503,
    message: `this cluster is not served at the moment: its settings on the admission webhook's app are incomplete or wrong (correlation ID ${correlationId}); its operator finds the reason in the app's log`,
    warning: JSON.stringify({ event: "gmsa.clusterUnavailable", cluster, webhook, status: 503, correlationId, reason: `cluster "${cluster}" is not served: ${reason}` }),
  };
}

function refusal(cluster: string, webhook: string, what: string): string {
  return JSON.stringify({ event: "gmsa.clusterSecretRefused", cluster, webhook, status: 401, reason: `refused a request for cluster "${cluster}" with ${what}` });
}
