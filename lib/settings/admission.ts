import * as t from "io-ts";
import { checkTokenHost } from "../kube/aksApiServerHost.js";
import { apiServerUrl } from "../kube/apiServerEndpoint.js";
import type { ClusterAccessSettings, ClusterClientSettings } from "../kube/clusterAccess.js";
import { booleanSetting, decodeWith, emptyAsUnset, integerSetting, oneOf, SettingsError, withDefault } from "./environment.js";

export type { ClusterAccessSettings } from "../kube/clusterAccess.js";

/** The admission settings of one instance: the policy's, and how its one cluster is reached (lib/kube declares that part). */

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
  GMSA_CREDSPEC_CACHE_MAX_BYTES: withDefault(integerSetting("GMSA_CREDSPEC_CACHE_MAX_BYTES", 0, 1 << 30), 64 << 20),
});

export interface AdmissionSettings extends ClusterClientSettings {
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

export function decodeAdmissionEnvironment(env: NodeJS.ProcessEnv): { raw: AdmissionEnvironmentValues; shared: SharedAdmissionSettings; problems: string[] } {
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

export function entraIdentity(raw: AdmissionEnvironmentValues): { armEndpoint?: string; clientId?: string } {
  return {
    ...(raw.GMSA_ARM_ENDPOINT ? { armEndpoint: raw.GMSA_ARM_ENDPOINT } : {}),
    ...(raw.AZURE_CLIENT_ID?.trim() ? { clientId: raw.AZURE_CLIENT_ID.trim() } : {}),
  };
}
