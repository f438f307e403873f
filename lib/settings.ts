import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { clusterSecretSettingName, isMemberSecret, memberNamePattern, memberSecretRule } from "./fleet/memberIdentity.js";
import { parse as parseJsonTree, type AnyNode } from "@humanwhocodes/momoa";
import { isIP } from "node:net";
import { aksApiServerDomains, ApiServerHostError, checkAksApiServer } from "./kube/aksApiServerHost.js";
import { parseAksResourceId } from "./kube/aksResourceId.js";
import { apiServerUrl, caBundlePem } from "./kube/apiServerEndpoint.js";

/**
 * Every setting is an environment variable, the same names locally and as Function App
 * settings. They are decoded once at start-up; a bad value stops start-up with its name.
 */
function booleanSetting(name: string): t.Type<boolean, string, unknown> {
  return new t.Type<boolean, string, unknown>(
    name,
    (u): u is boolean => typeof u === "boolean",
    (u, c) => {
      const text = typeof u === "string" ? u.trim().toLowerCase() : u;
      if (text === "true" || text === "1") return t.success(true);
      if (text === "false" || text === "0" || text === "") return t.success(false);
      return t.failure(u, c, `${name} must be true or false, got ${JSON.stringify(u)}`);
    },
    String,
  );
}

function integerSetting(name: string, min: number, max: number): t.Type<number, string, unknown> {
  return new t.Type<number, string, unknown>(
    name,
    (u): u is number => typeof u === "number",
    (u, c) => {
      const value = typeof u === "string" && /^\s*\d+\s*$/.test(u) ? Number(u) : NaN;
      return Number.isInteger(value) && value >= min && value <= max
        ? t.success(value)
        : t.failure(u, c, `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(u)}`);
    },
    String,
  );
}

function oneOf<const V extends string>(name: string, values: readonly V[]): t.Type<V, string, unknown> {
  return new t.Type<V, string, unknown>(
    name,
    (u): u is V => typeof u === "string" && (values as readonly string[]).includes(u),
    (u, c) =>
      typeof u === "string" && (values as readonly string[]).includes(u)
        ? t.success(u as V)
        : t.failure(u, c, `${name} must be one of ${values.join(", ")}, got ${JSON.stringify(u)}`),
    String,
  );
}

function withDefault<A>(codec: t.Type<A, string, unknown>, fallback: A): t.Type<A, string, unknown> {
  return new t.Type<A, string, unknown>(codec.name, codec.is, (u, c) => (u === undefined ? t.success(fallback) : codec.validate(u, c)), codec.encode);
}

const clusterAccessModes = ["kubeconfig", "in-cluster", "entra"] as const;
export type ClusterAccess = (typeof clusterAccessModes)[number];

const AdmissionEnvironment = t.type({
  GMSA_RANDOM_HOSTNAME: withDefault(booleanSetting("GMSA_RANDOM_HOSTNAME"), false),
  GMSA_AUTHORIZE_REQUESTING_USER: withDefault(booleanSetting("GMSA_AUTHORIZE_REQUESTING_USER"), false),
  GMSA_API_TIMEOUT_MS: withDefault(integerSetting("GMSA_API_TIMEOUT_MS", 50, 30_000), 2_000),
  GMSA_ADMISSION_BUDGET_MS: withDefault(integerSetting("GMSA_ADMISSION_BUDGET_MS", 100, 29_000), 4_000),
  GMSA_AUTH_CACHE_TTL_SECONDS: withDefault(integerSetting("GMSA_AUTH_CACHE_TTL_SECONDS", 0, 300), 5),
  GMSA_CREDSPEC_CACHE: withDefault(booleanSetting("GMSA_CREDSPEC_CACHE"), true),
  GMSA_API_CONCURRENCY: withDefault(integerSetting("GMSA_API_CONCURRENCY", 1, 256), 16),
  GMSA_INSTANCE_CONCURRENCY: withDefault(integerSetting("GMSA_INSTANCE_CONCURRENCY", 1, 1_000), 16),
  GMSA_MAX_CREDSPECS_PER_POD: withDefault(integerSetting("GMSA_MAX_CREDSPECS_PER_POD", 1, 1_000), 16),
  GMSA_MAX_PLACES_PER_POD: withDefault(integerSetting("GMSA_MAX_PLACES_PER_POD", 1, 1_000), 64),
  GMSA_CLUSTER_ACCESS: t.union([oneOf("GMSA_CLUSTER_ACCESS", clusterAccessModes), t.undefined]),
  KUBECONFIG: t.union([t.string, t.undefined]),
  GMSA_AKS_RESOURCE_ID: t.union([t.string, t.undefined]),
  GMSA_API_SERVER_URL: t.union([t.string, t.undefined]),
  GMSA_API_SERVER_CA: t.union([t.string, t.undefined]),
  GMSA_ARM_ENDPOINT: t.union([t.string, t.undefined]),
  AZURE_CLIENT_ID: t.union([t.string, t.undefined]),
  KUBERNETES_SERVICE_HOST: t.union([t.string, t.undefined]),
  // Unset: as many as there are API slots.
  GMSA_API_MAX_WAITING: t.union([integerSetting("GMSA_API_MAX_WAITING", 0, 1_024), t.undefined]),
  GMSA_CREDSPEC_CACHE_MAX_SPECS: withDefault(integerSetting("GMSA_CREDSPEC_CACHE_MAX_SPECS", 0, 1_000_000), 5_000),
  GMSA_CREDSPEC_CACHE_MAX_BYTES: withDefault(integerSetting("GMSA_CREDSPEC_CACHE_MAX_BYTES", 0, 1 << 30), 16 << 20),
});

export interface AdmissionSettings {
  readonly randomHostname: boolean;
  readonly authorizeRequestingUser: boolean;
  readonly apiTimeoutMs: number;
  readonly admissionBudgetMs: number;
  /** How long a `use` answer is reused; 0 asks every time. */
  readonly authCacheTtlMs: number;
  /** Keep every credential spec in memory with a list+watch instead of a GET per admission. */
  readonly credSpecCache: boolean;
  /** The most calls one instance has in flight towards the API server; the rest wait their turn. */
  readonly apiConcurrency: number;
  /**
   * How many requests one instance serves at once (Flex Consumption's per-instance HTTP
   * concurrency, which the Bicep sets from the same parameter). One cluster's admissions that wait
   * on its API server may hold only its memberShare of them.
   */
  readonly instanceConcurrency: number;
  /** The most distinct credential spec names one pod may carry; more is refused before any API call. */
  readonly maxCredSpecsPerPod: number;
  /** The most places (pod, containers, annotations) one pod may set GMSA settings in; more is refused before any API call. */
  readonly maxPlacesPerPod: number;
  /** The most admissions that may wait for one of a cluster's API slots; past it one that needs a call is refused at once. */
  readonly apiMaxWaiting: number;
  /** The most credential specs, and bytes of them as JSON, one cluster's cache may hold; past either it stops and lookups read the API server. */
  readonly credSpecCacheMaxSpecs: number;
  readonly credSpecCacheMaxBytes: number;
  readonly cluster: ClusterAccessSettings;
}

/** How one cluster's API server is reached. */
export type ClusterAccessSettings =
  | {
      readonly access: "kubeconfig";
      readonly kubeconfig: string;
      /** The kubeconfig context to use instead of its current one (fleet members only). */
      readonly context?: string;
    }
  | { readonly access: "in-cluster" }
  | {
      readonly access: "entra";
      /** The AKS cluster's resource ID: its URL and CA come from ARM. */
      readonly resourceId?: string;
      /** Or the API server's URL (and CA) directly. */
      readonly server?: string;
      readonly caPem?: string;
      readonly armEndpoint?: string;
      /** The user-assigned managed identity to sign in with. */
      readonly clientId?: string;
    };

export class SettingsError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid settings:\n  ${problems.join("\n  ")}`);
    this.name = "SettingsError";
  }
}

function emptyAsUnset(env: NodeJS.ProcessEnv, names: readonly string[]): Record<string, string | undefined> {
  return Object.fromEntries(names.map((name) => [name, env[name] === "" ? undefined : env[name]]));
}

export function decodeWith<A>(codec: t.Decoder<unknown, A>, env: Record<string, string | undefined>): A {
  const decoded = codec.decode(env);
  if (isLeft(decoded))
    throw new SettingsError([
      ...new Set(
        decoded.left.map(
          (e) =>
            e.message ??
            `${e.context
              .map((c) => c.key)
              .filter(Boolean)
              .join(".")} is invalid`,
        ),
      ),
    ]);
  return decoded.right;
}

const networkModes = ["public", "private"] as const;
export type NetworkMode = (typeof networkModes)[number];

const wiringModes = ["url", "relay"] as const;
/** How the API server's calls arrive: straight from the API server (url), or through the in-cluster relay. */
export type WiringMode = (typeof wiringModes)[number];

const EndpointEnvironment = t.type({
  GMSA_REQUIRE_FUNCTION_KEY: withDefault(booleanSetting("GMSA_REQUIRE_FUNCTION_KEY"), false),
  GMSA_NETWORK_MODE: t.union([oneOf("GMSA_NETWORK_MODE", networkModes), t.undefined]),
  GMSA_WIRING_MODE: t.union([oneOf("GMSA_WIRING_MODE", wiringModes), t.undefined]),
  // Set by App Service on every Function App: the app is on Azure, where reachability is decided
  // by the network mode.
  WEBSITE_SITE_NAME: t.union([t.string, t.undefined]),
  // Set in every pod: an app run inside a cluster is reachable by that cluster's pods.
  KUBERNETES_SERVICE_HOST: t.union([t.string, t.undefined]),
});

/** Who may call the webhooks and /metrics: decided when the functions are registered. */
export interface EndpointProtection {
  /** Callers must present a function key (function-level authorization). */
  readonly requireFunctionKey: boolean;
  /** How the app is reachable, as deployed; unset outside Azure. */
  readonly networkMode?: NetworkMode;
  /** How the API server's calls reach the app, as deployed; unset outside Azure. */
  readonly wiringMode?: WiringMode;
}

/**
 * Read before any function is registered (the authorization level is fixed at registration), so
 * a bad value stops the app from loading at all rather than leaving an endpoint open.
 *
 * An AdmissionReview carries no proof that the API server wrote it: whoever reaches the webhooks
 * can ask for any credential spec's contents in the name of a service account that may use it.
 * So a deployed app serves them without a function key in one case only: private, and called by
 * the API server itself (url wiring), whose subnet alone the private endpoint admits. The API
 * server cannot send a key there; a relay can, and its pods share their subnets with every pod.
 */
export function readEndpointProtection(env: NodeJS.ProcessEnv = process.env): EndpointProtection {
  const raw = decodeWith(EndpointEnvironment, emptyAsUnset(env, Object.keys(EndpointEnvironment.props)));
  const onAzure = raw.WEBSITE_SITE_NAME !== undefined;
  const inPod = raw.KUBERNETES_SERVICE_HOST !== undefined;
  // On Azure, an app that does not say how it is reachable might be public; in a pod, every other
  // pod may reach it: neither starts without saying how it is reached.
  if ((onAzure || inPod) && raw.GMSA_NETWORK_MODE === undefined) {
    const where = onAzure ? `on a Function App (${raw.WEBSITE_SITE_NAME})` : "inside a pod (KUBERNETES_SERVICE_HOST is set)";
    throw new SettingsError([`GMSA_NETWORK_MODE must be public or private ${where}; the Bicep in infra/ sets it`]);
  }
  // A public endpoint without keys would let anyone on the internet ask for credential specs.
  if (raw.GMSA_NETWORK_MODE === "public" && !raw.GMSA_REQUIRE_FUNCTION_KEY) {
    throw new SettingsError(["GMSA_NETWORK_MODE=public needs GMSA_REQUIRE_FUNCTION_KEY=true: the webhooks are never served anonymously on a public endpoint"]);
  }
  const deployed = onAzure || inPod || raw.GMSA_NETWORK_MODE !== undefined || raw.GMSA_WIRING_MODE !== undefined;
  if (deployed) {
    if (raw.GMSA_NETWORK_MODE === undefined || raw.GMSA_WIRING_MODE === undefined) {
      throw new SettingsError(["GMSA_NETWORK_MODE (public or private) and GMSA_WIRING_MODE (url or relay) go together: a deployment says both; the Bicep in infra/ sets them"]);
    }
    if (raw.GMSA_NETWORK_MODE === "public" && raw.GMSA_WIRING_MODE === "url") {
      throw new SettingsError(["GMSA_WIRING_MODE=url needs GMSA_NETWORK_MODE=private: a public app is reached through the relay, which sends the function key"]);
    }
    // Relay wiring: the relay's traffic leaves from the node (or pod) subnets, which every pod
    // shares, so the network cannot tell the relay from a pod that forges reviews; the key can.
    if (raw.GMSA_WIRING_MODE === "relay" && !raw.GMSA_REQUIRE_FUNCTION_KEY) {
      throw new SettingsError([
        "GMSA_WIRING_MODE=relay needs GMSA_REQUIRE_FUNCTION_KEY=true: the relay sends the function key, and without it any pod that reaches the app could forge admission reviews",
      ]);
    }
  }
  return {
    requireFunctionKey: raw.GMSA_REQUIRE_FUNCTION_KEY,
    ...(raw.GMSA_NETWORK_MODE ? { networkMode: raw.GMSA_NETWORK_MODE } : {}),
    ...(raw.GMSA_WIRING_MODE ? { wiringMode: raw.GMSA_WIRING_MODE } : {}),
  };
}

const PolicyEnvironment = t.type({
  GMSA_RANDOM_HOSTNAME: AdmissionEnvironment.props.GMSA_RANDOM_HOSTNAME,
  GMSA_AUTHORIZE_REQUESTING_USER: AdmissionEnvironment.props.GMSA_AUTHORIZE_REQUESTING_USER,
  GMSA_MAX_CREDSPECS_PER_POD: AdmissionEnvironment.props.GMSA_MAX_CREDSPECS_PER_POD,
  GMSA_MAX_PLACES_PER_POD: AdmissionEnvironment.props.GMSA_MAX_PLACES_PER_POD,
});

/**
 * Only the settings that change what the policy decides, for tools that run the policy outside
 * the webhook (`credspec explain`): set them as the Function App has them to get its answers.
 */
export function readPolicySettings(
  env: NodeJS.ProcessEnv = process.env,
): Pick<AdmissionSettings, "randomHostname" | "authorizeRequestingUser" | "maxCredSpecsPerPod" | "maxPlacesPerPod"> {
  const raw = decodeWith(PolicyEnvironment, emptyAsUnset(env, Object.keys(PolicyEnvironment.props)));
  return {
    randomHostname: raw.GMSA_RANDOM_HOSTNAME,
    authorizeRequestingUser: raw.GMSA_AUTHORIZE_REQUESTING_USER,
    maxCredSpecsPerPod: raw.GMSA_MAX_CREDSPECS_PER_POD,
    maxPlacesPerPod: raw.GMSA_MAX_PLACES_PER_POD,
  };
}

/** The settings every member of a fleet shares: all but how its cluster is reached. */
export type SharedAdmissionSettings = Omit<AdmissionSettings, "cluster">;

type AdmissionEnvironmentValues = t.TypeOf<typeof AdmissionEnvironment>;

function decodeAdmissionEnvironment(env: NodeJS.ProcessEnv): { raw: AdmissionEnvironmentValues; shared: SharedAdmissionSettings; problems: string[] } {
  const raw = decodeWith(AdmissionEnvironment, emptyAsUnset(env, Object.keys(AdmissionEnvironment.props)));
  const problems: string[] = [];
  if (raw.GMSA_API_TIMEOUT_MS > raw.GMSA_ADMISSION_BUDGET_MS) {
    problems.push(`GMSA_API_TIMEOUT_MS (${raw.GMSA_API_TIMEOUT_MS}) must not exceed GMSA_ADMISSION_BUDGET_MS (${raw.GMSA_ADMISSION_BUDGET_MS})`);
  }
  const shared: SharedAdmissionSettings = {
    randomHostname: raw.GMSA_RANDOM_HOSTNAME,
    authorizeRequestingUser: raw.GMSA_AUTHORIZE_REQUESTING_USER,
    apiTimeoutMs: raw.GMSA_API_TIMEOUT_MS,
    admissionBudgetMs: raw.GMSA_ADMISSION_BUDGET_MS,
    authCacheTtlMs: raw.GMSA_AUTH_CACHE_TTL_SECONDS * 1000,
    credSpecCache: raw.GMSA_CREDSPEC_CACHE,
    apiConcurrency: raw.GMSA_API_CONCURRENCY,
    instanceConcurrency: raw.GMSA_INSTANCE_CONCURRENCY,
    maxCredSpecsPerPod: raw.GMSA_MAX_CREDSPECS_PER_POD,
    maxPlacesPerPod: raw.GMSA_MAX_PLACES_PER_POD,
    apiMaxWaiting: raw.GMSA_API_MAX_WAITING ?? raw.GMSA_API_CONCURRENCY,
    credSpecCacheMaxSpecs: raw.GMSA_CREDSPEC_CACHE_MAX_SPECS,
    credSpecCacheMaxBytes: raw.GMSA_CREDSPEC_CACHE_MAX_BYTES,
  };
  return { raw, shared, problems };
}

/** The single-cluster settings: one cluster, named by KUBECONFIG, a managed cluster, or the pod it runs in. */
export function readAdmissionSettings(env: NodeJS.ProcessEnv = process.env): AdmissionSettings {
  const { raw, shared, problems } = decodeAdmissionEnvironment(env);
  const entraGiven = Boolean(raw.GMSA_AKS_RESOURCE_ID || raw.GMSA_API_SERVER_URL);
  const access = raw.GMSA_CLUSTER_ACCESS ?? (raw.KUBECONFIG ? "kubeconfig" : entraGiven ? "entra" : raw.KUBERNETES_SERVICE_HOST ? "in-cluster" : undefined);
  if (access === undefined) {
    problems.push(
      "no cluster to talk to: set KUBECONFIG, GMSA_AKS_RESOURCE_ID or GMSA_API_SERVER_URL, run inside a cluster, or set GMSA_CLUSTER_ACCESS (or GMSA_CLUSTERS for a fleet)",
    );
  } else if (access === "entra") {
    if (raw.GMSA_AKS_RESOURCE_ID && raw.GMSA_API_SERVER_URL) problems.push("GMSA_AKS_RESOURCE_ID and GMSA_API_SERVER_URL name the cluster twice: set one");
    else if (!entraGiven) problems.push("GMSA_CLUSTER_ACCESS=entra needs GMSA_AKS_RESOURCE_ID, or GMSA_API_SERVER_URL (and GMSA_API_SERVER_CA)");
    if (raw.GMSA_API_SERVER_URL && !raw.GMSA_API_SERVER_URL.startsWith("https://"))
      problems.push(`GMSA_API_SERVER_URL must be an https URL, got ${JSON.stringify(raw.GMSA_API_SERVER_URL)}`);
    else if (raw.GMSA_API_SERVER_URL) {
      try {
        checkTokenHost(apiServerUrl(raw.GMSA_API_SERVER_URL, "GMSA_API_SERVER_URL"), "GMSA_API_SERVER_URL");
      } catch (error) {
        problems.push(error instanceof Error ? error.message : String(error));
      }
    }
    if (raw.GMSA_API_SERVER_CA && !raw.GMSA_API_SERVER_URL) problems.push("GMSA_API_SERVER_CA goes with GMSA_API_SERVER_URL");
  } else if (access === "kubeconfig" && !raw.KUBECONFIG) {
    problems.push("GMSA_CLUSTER_ACCESS=kubeconfig needs KUBECONFIG");
  } else if (access === "in-cluster" && !raw.KUBERNETES_SERVICE_HOST) {
    problems.push("GMSA_CLUSTER_ACCESS=in-cluster needs KUBERNETES_SERVICE_HOST (it is set inside a pod)");
  }
  if (problems.length > 0) throw new SettingsError(problems);
  return {
    ...shared,
    cluster:
      access === "kubeconfig"
        ? { access, kubeconfig: raw.KUBECONFIG! }
        : access === "entra"
          ? {
              access,
              ...(raw.GMSA_AKS_RESOURCE_ID ? { resourceId: raw.GMSA_AKS_RESOURCE_ID } : {}),
              ...(raw.GMSA_API_SERVER_URL ? { server: raw.GMSA_API_SERVER_URL } : {}),
              ...(raw.GMSA_API_SERVER_CA ? { caPem: raw.GMSA_API_SERVER_CA } : {}),
              ...entraIdentity(raw),
            }
          : { access: "in-cluster" },
  };
}

function entraIdentity(raw: AdmissionEnvironmentValues): { armEndpoint?: string; clientId?: string } {
  return {
    ...(raw.GMSA_ARM_ENDPOINT ? { armEndpoint: raw.GMSA_ARM_ENDPOINT } : {}),
    ...(raw.AZURE_CLIENT_ID?.trim() ? { clientId: raw.AZURE_CLIENT_ID.trim() } : {}),
  };
}

/**
 * An API server named by URL gets the managed identity's Microsoft Entra token, whose audience is
 * the AKS server application: the same token opens every Entra-integrated AKS cluster in the
 * tenant (every other member of a fleet). So the URL must name an AKS API server, by the rule the
 * host names ARM gives are checked with (port 443, under a domain where AKS serves API servers,
 * no IP address). A loopback address is allowed beside it, for local use and tests: a token sent
 * there does not leave the machine.
 */
export function checkTokenHost(server: string, where: string): void {
  const url = new URL(server);
  // As written, trailing dot included: "localhost." is not looked up in /etc/hosts but asked of
  // DNS, which may answer any address.
  if (isLoopbackHost(url.hostname.toLowerCase())) return;
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  try {
    // The URL names the host it declares: what is checked is where that host is and its port.
    checkAksApiServer(server, { clusterHostNames: [host] }, where);
  } catch (error) {
    if (!(error instanceof ApiServerHostError)) throw error;
    throw new Error(
      `${where} must name an AKS API server (port 443, a host name under ${aksApiServerDomains.join(", ")}) or a loopback address, not ${url.host}: the managed identity's token sent there is valid on every AKS cluster of the tenant`,
    );
  }
}

/** 127.0.0.0/8, ::1 and localhost: a token sent there stays on this machine. */
function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.split(".")[0] === "127";
  return isIP(bare) === 6 && bare === "::1";
}

// --- A fleet: many clusters, one app ------------------------------------------------------------

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
