import { parse as parseJsonTree, type AnyNode } from "@humanwhocodes/momoa";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { clusterSecretSettingName, isMemberSecret, memberNamePattern, memberSecretRule } from "../fleet/memberIdentity.js";
import { checkTokenHost, isLoopbackHost } from "../kube/aksApiServerHost.js";
import { parseAksResourceId } from "../kube/aksResourceId.js";
import { apiServerUrl, caBundlePem } from "../kube/apiServerEndpoint.js";
import type { ClusterAccessSettings } from "../kube/clusterAccess.js";
import { decodeAdmissionEnvironment, entraIdentity, readAdmissionSettings, type AdmissionSettings, type SharedAdmissionSettings } from "./admission.js";
import { decodeWith, emptyAsUnset, integerSetting, SettingsError, withDefault } from "./environment.js";

/** A fleet: many clusters, one app. */

/** The name the single-cluster settings give their one cluster. */
export const defaultMemberName = "default";
export const maxFleetMembers = 64;

/** One cluster the app serves: its name (in its paths and log lines), its access, its wiring's secrets. */
export interface FleetMemberSettings {
  readonly name: string;
  /** The shared settings with this member's access: what its cluster client is built from. */
  readonly settings: AdmissionSettings;
  /**
   * The secrets its wiring may present (two during a rotation, the new one first); empty for the
   * single-cluster member, which is served on today's paths without one.
   */
  readonly secrets: readonly string[];
}

/**
 * A member whose own settings are wrong: kept out of service rather than stopping every other
 * member with it. Its requests are answered 503 and it never starts a client.
 */
export interface UnavailableMember {
  readonly name: string;
  /** Which of its settings is wrong and how, for the log and /metrics: never a secret. */
  readonly reason: string;
  /**
   * Its secrets when they are usable (its access is what is wrong): a request must still present
   * one before it is told anything. Empty when the secret itself is the problem.
   */
  readonly secrets: readonly string[];
}

export interface FleetSettings {
  /** `single`: no GMSA_CLUSTERS, one member named "default" on today's paths; `fleet`: /clusters/{name}/… */
  readonly mode: "single" | "fleet";
  readonly shared: SharedAdmissionSettings;
  /** The usable members, in the order GMSA_CLUSTERS lists them. */
  readonly members: readonly FleetMemberSettings[];
  /** Members kept out of service by a problem of their own (fleet mode only), in GMSA_CLUSTERS order. */
  readonly unavailable?: readonly UnavailableMember[];
  /** A fleet member with no admission for this long stops its watch and frees its caches. */
  readonly idleMs: number;
}

export { clusterSecretSettingName };

/** Where a problem is, as `GMSA_CLUSTERS.alpha.apiServerUrl`. */
function pathOf(context: t.Context): string {
  return context
    .map((entry) => entry.key)
    .filter((key) => key !== "")
    .join(".");
}

function clusterField<A>(name: string, check: (value: string, where: string) => A): t.Type<A, unknown, unknown> {
  return new t.Type<A, unknown, unknown>(
    name,
    (u): u is A => u !== undefined,
    (u, c) => {
      const where = pathOf(c);
      if (typeof u !== "string" || u.trim() === "") return t.failure(u, c, `${where} must be a non-empty string`);
      try {
        return t.success(check(u.trim(), where));
      } catch (error) {
        return t.failure(u, c, error instanceof Error ? error.message : `${where} is invalid`);
      }
    },
    (a) => a,
  );
}

const text = clusterField("text", (value) => value);
const httpsUrl = clusterField("apiServerUrl", (value, where) => {
  let url: string;
  try {
    url = apiServerUrl(value, where);
  } catch {
    throw new Error(`${where} must be an https URL without credentials, query or fragment`);
  }
  checkTokenHost(url, where);
  return url;
});
const caBundle = clusterField("apiServerCa", (value, where) => caBundlePem(value, where));
const aksResourceId = clusterField("aksResourceId", (value, where) => {
  try {
    return parseAksResourceId(value).id;
  } catch (error) {
    throw new Error(`${where}: ${error instanceof Error ? error.message : String(error)}`);
  }
});

const accessFields = {
  kubeconfig: { kubeconfig: text, context: text },
  aksResourceId: { aksResourceId },
  apiServerUrl: { apiServerUrl: httpsUrl, apiServerCa: caBundle },
} as const;
type AccessKind = keyof typeof accessFields;
const accessKinds = Object.keys(accessFields) as AccessKind[];
const allAccessFields = accessKinds.flatMap((kind) => Object.keys(accessFields[kind]));

/** One member's access: exactly one of the three kinds, and no field that is not one of its own. */
type MemberAccess =
  { readonly kubeconfig: string; readonly context?: string } | { readonly aksResourceId: string } | { readonly apiServerUrl: string; readonly apiServerCa?: string };

const MemberAccess = new t.Type<MemberAccess, unknown, unknown>(
  "MemberAccess",
  (u): u is MemberAccess => typeof u === "object" && u !== null,
  (u, c) => {
    const where = pathOf(c);
    if (typeof u !== "object" || u === null || Array.isArray(u)) {
      return t.failure(u, c, `${where} must be an object with one of ${accessKinds.join(", ")}`);
    }
    const given = Object.keys(u);
    const kinds = accessKinds.filter((kind) => given.includes(kind));
    if (kinds.length !== 1) {
      return t.failure(u, c, `${where} must give exactly one of ${accessKinds.join(", ")}${kinds.length > 1 ? `, not ${kinds.join(" and ")}` : ""}`);
    }
    const kind = kinds[0]!;
    const own = Object.keys(accessFields[kind]);
    const stray = given.filter((key) => !own.includes(key));
    if (stray.length > 0) {
      const known = stray.filter((key) => allAccessFields.includes(key));
      return t.failure(u, c, `${where}.${stray[0]} ${known.length > 0 ? `does not go with ${kind}` : `is not a setting (${kind} takes ${own.join(", ")})`}`);
    }
    const fields: Record<string, t.Type<string, unknown, unknown>> = accessFields[kind];
    const values: Record<string, string> = {};
    const errors: t.Errors = [];
    for (const key of own) {
      const value: unknown = Reflect.get(u, key);
      // The first field of each kind is the one that names it, and it was given.
      if (value === undefined) continue;
      const field = fields[key]!;
      const result = field.validate(value, t.appendContext(c, key, field, value));
      if (isLeft(result)) errors.push(...result.left);
      else values[key] = result.right;
    }
    if (errors.length > 0) return t.failures(errors);
    const access: MemberAccess =
      kind === "kubeconfig"
        ? { kubeconfig: values.kubeconfig!, ...(values.context !== undefined ? { context: values.context } : {}) }
        : kind === "aksResourceId"
          ? { aksResourceId: values.aksResourceId! }
          : { apiServerUrl: values.apiServerUrl!, ...(values.apiServerCa !== undefined ? { apiServerCa: values.apiServerCa } : {}) };
    return t.success(access);
  },
  (a) => a,
);

const ClusterName = new t.Type<string, string, unknown>(
  "ClusterName",
  (u): u is string => typeof u === "string",
  (u, c) =>
    typeof u === "string" && memberNamePattern.test(u)
      ? t.success(u)
      : t.failure(
          u,
          c,
          `GMSA_CLUSTERS: ${JSON.stringify(String(u).slice(0, 80))} is not a cluster name (a DNS label: 1 to 63 of a-z, 0-9 and -, starting and ending with a letter or digit)`,
        ),
  String,
);

/**
 * The list itself: an object whose keys are cluster names. What each name maps to is decoded per
 * member (MemberAccess), since a wrong access concerns that member only.
 */
const ClusterList = new t.Type<Record<string, unknown>, unknown, unknown>(
  "GMSA_CLUSTERS",
  (u): u is Record<string, unknown> => typeof u === "object" && u !== null,
  (u, c) => {
    if (typeof u !== "object" || u === null || Array.isArray(u)) {
      return t.failure(u, c, 'GMSA_CLUSTERS must be a JSON object from cluster name to its access, as {"alpha": {"aksResourceId": "/subscriptions/…"}}');
    }
    const errors: t.Errors = [];
    const members: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(u)) {
      const named = ClusterName.validate(name, c);
      if (isLeft(named)) errors.push(...named.left);
      else members[name] = value;
    }
    return errors.length > 0 ? t.failures(errors) : t.success(members);
  },
  (a) => a,
);

/**
 * One API server as a comparable string: scheme and host lower-case (without a trailing dot),
 * the default port dropped, no trailing slash. Two members whose servers give the same string
 * reach the same cluster. A loopback host (127.0.0.0/8, ::1, localhost, judged as written like
 * the token host rule) is compared by its port alone: 127.0.0.1, 127.0.0.2, [::1] and localhost
 * all reach a server listening on the machine, and two servers bound to different loopback
 * addresses on one port are taken for one (both members are kept out, the safe side). Other
 * hosts are compared as spelt: two names of one server (an AKS cluster's public and private
 * FQDN) are not known to be one without asking DNS or ARM, and are not caught here.
 */
export function apiServerTarget(server: string): string {
  try {
    const url = new URL(server.trim());
    const written = url.hostname.toLowerCase();
    if (isLoopbackHost(written)) return `loopback:${url.port === "" ? (url.protocol === "http:" ? "80" : "443") : url.port}`;
    const host = written.replace(/\.$/, "");
    const port = url.port === "" || (url.protocol === "https:" && url.port === "443") ? "" : `:${url.port}`;
    return `${url.protocol}//${host}${port}${url.pathname.replace(/\/+$/, "")}`;
  } catch {
    return server.trim();
  }
}

/** What the settings alone tell about a member's cluster (a kubeconfig's server is known once it is read). */
function settingsTarget(cluster: ClusterAccessSettings): string | undefined {
  if (cluster.access !== "entra") return undefined;
  if (cluster.resourceId !== undefined) return `aks:${cluster.resourceId.toLowerCase()}`;
  return cluster.server === undefined ? undefined : `url:${apiServerTarget(cluster.server)}`;
}

/** The problem of members that reach one cluster, naming them all. */
export function sameTargetProblem(names: readonly string[], how: string): string {
  const listed = names.map((name) => `GMSA_CLUSTERS.${name}`);
  return `${listed.slice(0, -1).join(", ")} and ${listed.at(-1)} name the same cluster (${how}): each member needs a cluster of its own, or one would answer for the other`;
}

/** The JSON of GMSA_CLUSTERS, with every key given twice named (JSON.parse would keep the last one silently). */
function parseClusterList(value: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    throw new SettingsError([`GMSA_CLUSTERS is not JSON: ${error instanceof Error ? error.message.slice(0, 200) : "unreadable"}`]);
  }
  const twice = duplicateKeys(parseJsonTree(value).body, "GMSA_CLUSTERS");
  if (twice.length > 0) throw new SettingsError(twice.map((where) => `${where} is given more than once`));
  return parsed;
}

function duplicateKeys(node: AnyNode, where: string): string[] {
  if (node.type === "Array") return node.elements.flatMap((element, index) => duplicateKeys(element.value, `${where}.${index}`));
  if (node.type !== "Object") return [];
  const seen = new Set<string>();
  const found: string[] = [];
  for (const member of node.members) {
    const key = member.name.type === "String" ? member.name.value : member.name.name;
    if (seen.has(key)) found.push(`${where}.${key}`);
    seen.add(key);
    found.push(...duplicateKeys(member.value, `${where}.${key}`));
  }
  return found;
}

function memberSecrets(name: string, env: NodeJS.ProcessEnv, problems: string[]): string[] {
  const setting = clusterSecretSettingName(name);
  const value = env[setting]?.trim() ?? "";
  // Never the value in a message: it is the secret, or most of it.
  if (value === "") {
    problems.push(`${setting} is required: every member of GMSA_CLUSTERS needs the secret its wiring presents`);
    return [];
  }
  if (value.startsWith("@Microsoft.KeyVault(")) {
    problems.push(`${setting} is a Key Vault reference the platform could not resolve: check the app's identity may read the secret`);
    return [];
  }
  const parts = value.split(",").map((part) => part.trim());
  if (parts.length > 2 || !parts.every(isMemberSecret)) {
    problems.push(`${setting} must be one secret, or two separated by a comma while rotating (new,old), each ${memberSecretRule}`);
    return [];
  }
  return [...new Set(parts)];
}

const FleetEnvironment = t.type({
  GMSA_CLUSTERS: t.union([t.string, t.undefined]),
  GMSA_CLUSTER_IDLE_SECONDS: withDefault(integerSetting("GMSA_CLUSTER_IDLE_SECONDS", 60, 86_400), 900),
});

/** With GMSA_CLUSTERS these would name a cluster beside the fleet's: refused rather than guessed at. */
const singleClusterSettings = ["GMSA_CLUSTER_ACCESS", "GMSA_AKS_RESOURCE_ID", "GMSA_API_SERVER_URL", "GMSA_API_SERVER_CA"] as const;

/**
 * The clusters this app serves. Without GMSA_CLUSTERS: the single-cluster settings, as one
 * member named "default" on today's paths. With it: one member per entry, each with the secret
 * its wiring presents; KUBECONFIG is ignored (it is often set for kubectl).
 */
export function readFleetSettings(env: NodeJS.ProcessEnv = process.env): FleetSettings {
  const fleet = decodeWith(FleetEnvironment, emptyAsUnset(env, Object.keys(FleetEnvironment.props)));
  const idleMs = fleet.GMSA_CLUSTER_IDLE_SECONDS * 1000;
  if (fleet.GMSA_CLUSTERS === undefined || fleet.GMSA_CLUSTERS.trim() === "") {
    const settings = readAdmissionSettings(env);
    const { cluster: _cluster, ...shared } = settings;
    return { mode: "single", shared, members: [{ name: defaultMemberName, settings, secrets: [] }], idleMs };
  }
  const { raw, shared, problems } = decodeAdmissionEnvironment({ ...env, KUBECONFIG: undefined });
  for (const name of singleClusterSettings) {
    if (raw[name] !== undefined) problems.push(`${name} names a single cluster and GMSA_CLUSTERS a fleet: set one (each fleet member gives its own access)`);
  }
  const list = parseClusterList(fleet.GMSA_CLUSTERS);
  const decoded = ClusterList.validate(list, [{ key: "GMSA_CLUSTERS", type: ClusterList, actual: list }]);
  if (isLeft(decoded)) throw new SettingsError([...problems, ...new Set(decoded.left.map((e) => e.message ?? `${pathOf(e.context)} is invalid`))]);
  const entries = Object.entries(decoded.right);
  if (entries.length === 0) problems.push("GMSA_CLUSTERS names no cluster: give at least one, or unset it for a single cluster");
  if (entries.length > maxFleetMembers) problems.push(`GMSA_CLUSTERS names ${entries.length} clusters; one app serves at most ${maxFleetMembers}`);
  const identity = entraIdentity(raw);
  // What is wrong with one member only: it is kept out of service, the others serve.
  const memberProblems = new Map<string, string[]>(entries.map(([name]) => [name, []]));
  const candidates = entries.map(([name, value]) => {
    const own = memberProblems.get(name)!;
    const secrets = memberSecrets(name, env, own);
    const where = [{ key: "GMSA_CLUSTERS", type: ClusterList, actual: list }];
    const access = MemberAccess.validate(value, t.appendContext(where, name, MemberAccess, value));
    if (isLeft(access)) {
      own.push(...new Set(access.left.map((e) => e.message ?? `${pathOf(e.context)} is invalid`)));
      return { name, secrets, cluster: undefined };
    }
    const given = access.right;
    const cluster: ClusterAccessSettings =
      "kubeconfig" in given
        ? { access: "kubeconfig", kubeconfig: given.kubeconfig, ...(given.context ? { context: given.context } : {}) }
        : "aksResourceId" in given
          ? { access: "entra", resourceId: given.aksResourceId, ...identity }
          : { access: "entra", server: given.apiServerUrl, ...(given.apiServerCa ? { caPem: given.apiServerCa } : {}), ...identity };
    return { name, secrets, cluster };
  });
  // A secret two members share cannot tell their wirings apart: neither may serve with it.
  const owners = new Map<string, string>();
  const sharing = new Set<string>();
  for (const member of candidates) {
    for (const secret of member.secrets) {
      const other = owners.get(secret);
      if (other !== undefined && other !== member.name) {
        const problem = `${clusterSecretSettingName(other)} and ${clusterSecretSettingName(member.name)} hold the same secret: each member needs its own`;
        memberProblems.get(other)!.push(problem);
        memberProblems.get(member.name)!.push(problem);
        sharing.add(other).add(member.name);
      }
      owners.set(secret, member.name);
    }
  }
  // Two members that reach one cluster would answer each other's reviews from it: neither serves.
  const targets = new Map<string, string[]>();
  for (const member of candidates) {
    const key = member.cluster === undefined ? undefined : settingsTarget(member.cluster);
    if (key !== undefined) targets.set(key, [...(targets.get(key) ?? []), member.name]);
  }
  for (const [key, names] of targets) {
    if (names.length < 2) continue;
    const problem = sameTargetProblem(names, key.startsWith("aks:") ? "aksResourceId, compared without case" : "apiServerUrl");
    for (const name of names) memberProblems.get(name)!.push(problem);
  }
  const allMemberProblems = [...memberProblems.values()].flat();
  // A problem of the fleet as a whole stops start-up, and then every problem is told at once.
  if (problems.length > 0) throw new SettingsError([...new Set([...problems, ...allMemberProblems])]);
  const members: FleetMemberSettings[] = [];
  const unavailable: UnavailableMember[] = [];
  for (const member of candidates) {
    const own = [...new Set(memberProblems.get(member.name))];
    if (own.length === 0 && member.cluster !== undefined) members.push({ name: member.name, settings: { ...shared, cluster: member.cluster }, secrets: member.secrets });
    else unavailable.push({ name: member.name, reason: own.join("; "), secrets: sharing.has(member.name) ? [] : member.secrets });
  }
  return { mode: "fleet", shared, members, unavailable, idleMs };
}
