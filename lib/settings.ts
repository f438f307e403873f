import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";

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
  GMSA_MAX_CREDSPECS_PER_POD: withDefault(integerSetting("GMSA_MAX_CREDSPECS_PER_POD", 1, 1_000), 16),
  GMSA_CLUSTER_ACCESS: t.union([oneOf("GMSA_CLUSTER_ACCESS", clusterAccessModes), t.undefined]),
  KUBECONFIG: t.union([t.string, t.undefined]),
  GMSA_AKS_RESOURCE_ID: t.union([t.string, t.undefined]),
  GMSA_API_SERVER_URL: t.union([t.string, t.undefined]),
  GMSA_API_SERVER_CA: t.union([t.string, t.undefined]),
  GMSA_ARM_ENDPOINT: t.union([t.string, t.undefined]),
  AZURE_CLIENT_ID: t.union([t.string, t.undefined]),
  KUBERNETES_SERVICE_HOST: t.union([t.string, t.undefined]),
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
  /** The most distinct credential spec names one pod may carry; more is refused before any API call. */
  readonly maxCredSpecsPerPod: number;
  readonly cluster:
    | { readonly access: "kubeconfig"; readonly kubeconfig: string }
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
}

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
  if (isLeft(decoded)) throw new SettingsError([...new Set(decoded.left.map((e) => e.message ?? `${e.context.map((c) => c.key).filter(Boolean).join(".")} is invalid`))]);
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
    throw new SettingsError([
      "GMSA_NETWORK_MODE=public needs GMSA_REQUIRE_FUNCTION_KEY=true: the webhooks are never served anonymously on a public endpoint",
    ]);
  }
  const deployed = onAzure || inPod || raw.GMSA_NETWORK_MODE !== undefined || raw.GMSA_WIRING_MODE !== undefined;
  if (deployed) {
    if (raw.GMSA_NETWORK_MODE === undefined || raw.GMSA_WIRING_MODE === undefined) {
      throw new SettingsError([
        "GMSA_NETWORK_MODE (public or private) and GMSA_WIRING_MODE (url or relay) go together: a deployment says both; the Bicep in infra/ sets them",
      ]);
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
});

/**
 * Only the settings that change what the policy decides, for tools that run the policy outside
 * the webhook (`credspec explain`): set them as the Function App has them to get its answers.
 */
export function readPolicySettings(env: NodeJS.ProcessEnv = process.env): Pick<AdmissionSettings, "randomHostname" | "authorizeRequestingUser" | "maxCredSpecsPerPod"> {
  const raw = decodeWith(PolicyEnvironment, emptyAsUnset(env, Object.keys(PolicyEnvironment.props)));
  return { randomHostname: raw.GMSA_RANDOM_HOSTNAME, authorizeRequestingUser: raw.GMSA_AUTHORIZE_REQUESTING_USER, maxCredSpecsPerPod: raw.GMSA_MAX_CREDSPECS_PER_POD };
}

export function readAdmissionSettings(env: NodeJS.ProcessEnv = process.env): AdmissionSettings {
  const raw = decodeWith(AdmissionEnvironment, emptyAsUnset(env, Object.keys(AdmissionEnvironment.props)));
  const problems: string[] = [];
  if (raw.GMSA_API_TIMEOUT_MS > raw.GMSA_ADMISSION_BUDGET_MS) {
    problems.push(`GMSA_API_TIMEOUT_MS (${raw.GMSA_API_TIMEOUT_MS}) must not exceed GMSA_ADMISSION_BUDGET_MS (${raw.GMSA_ADMISSION_BUDGET_MS})`);
  }
  const entraGiven = Boolean(raw.GMSA_AKS_RESOURCE_ID || raw.GMSA_API_SERVER_URL);
  const access =
    raw.GMSA_CLUSTER_ACCESS ?? (raw.KUBECONFIG ? "kubeconfig" : entraGiven ? "entra" : raw.KUBERNETES_SERVICE_HOST ? "in-cluster" : undefined);
  if (access === undefined) {
    problems.push("no cluster to talk to: set KUBECONFIG, GMSA_AKS_RESOURCE_ID or GMSA_API_SERVER_URL, run inside a cluster, or set GMSA_CLUSTER_ACCESS");
  } else if (access === "entra") {
    if (raw.GMSA_AKS_RESOURCE_ID && raw.GMSA_API_SERVER_URL) problems.push("GMSA_AKS_RESOURCE_ID and GMSA_API_SERVER_URL name the cluster twice: set one");
    else if (!entraGiven) problems.push("GMSA_CLUSTER_ACCESS=entra needs GMSA_AKS_RESOURCE_ID, or GMSA_API_SERVER_URL (and GMSA_API_SERVER_CA)");
    if (raw.GMSA_API_SERVER_URL && !raw.GMSA_API_SERVER_URL.startsWith("https://")) problems.push(`GMSA_API_SERVER_URL must be an https URL, got ${JSON.stringify(raw.GMSA_API_SERVER_URL)}`);
    if (raw.GMSA_API_SERVER_CA && !raw.GMSA_API_SERVER_URL) problems.push("GMSA_API_SERVER_CA goes with GMSA_API_SERVER_URL");
  } else if (access === "kubeconfig" && !raw.KUBECONFIG) {
    problems.push("GMSA_CLUSTER_ACCESS=kubeconfig needs KUBECONFIG");
  } else if (access === "in-cluster" && !raw.KUBERNETES_SERVICE_HOST) {
    problems.push("GMSA_CLUSTER_ACCESS=in-cluster needs KUBERNETES_SERVICE_HOST (it is set inside a pod)");
  }
  if (problems.length > 0) throw new SettingsError(problems);
  return {
    randomHostname: raw.GMSA_RANDOM_HOSTNAME,
    authorizeRequestingUser: raw.GMSA_AUTHORIZE_REQUESTING_USER,
    apiTimeoutMs: raw.GMSA_API_TIMEOUT_MS,
    admissionBudgetMs: raw.GMSA_ADMISSION_BUDGET_MS,
    authCacheTtlMs: raw.GMSA_AUTH_CACHE_TTL_SECONDS * 1000,
    credSpecCache: raw.GMSA_CREDSPEC_CACHE,
    apiConcurrency: raw.GMSA_API_CONCURRENCY,
    maxCredSpecsPerPod: raw.GMSA_MAX_CREDSPECS_PER_POD,
    cluster:
      access === "kubeconfig"
        ? { access, kubeconfig: raw.KUBECONFIG! }
        : access === "entra"
          ? {
              access,
              ...(raw.GMSA_AKS_RESOURCE_ID ? { resourceId: raw.GMSA_AKS_RESOURCE_ID } : {}),
              ...(raw.GMSA_API_SERVER_URL ? { server: raw.GMSA_API_SERVER_URL } : {}),
              ...(raw.GMSA_API_SERVER_CA ? { caPem: raw.GMSA_API_SERVER_CA } : {}),
              ...(raw.GMSA_ARM_ENDPOINT ? { armEndpoint: raw.GMSA_ARM_ENDPOINT } : {}),
              ...(raw.AZURE_CLIENT_ID?.trim() ? { clientId: raw.AZURE_CLIENT_ID.trim() } : {}),
            }
          : { access: "in-cluster" },
  };
}
