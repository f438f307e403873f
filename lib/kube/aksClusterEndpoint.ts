import type { TokenCredential } from "@azure/core-auth";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { setTimeout as sleep } from "node:timers/promises";
import { parse as parseYaml } from "yaml";
import { apiServerUrl, caBundlePem, type ApiServerEndpoint } from "./apiServerEndpoint.js";
import type { AksResourceId } from "./aksResourceId.js";
import { settleWithin } from "./settleWithin.js";

/**
 * Reads a managed cluster's API server URL and CA from Azure Resource Manager
 * (`listClusterUserCredential`), and the host names the cluster resource itself declares (a
 * GET of the managed cluster): the Azure Kubernetes Service Cluster User role allows both.
 * Only the cluster half of the kubeconfig is read: its users half is never decoded, kept or
 * logged, whatever it holds. Every call, the token for it included, is bounded in time.
 */
export const aksArmApiVersion = "2025-10-01";
export const defaultArmEndpoint = "https://management.azure.com";

/** The subset of `fetch` this module uses: global fetch fits, and so does a test's fake. */
export type ArmFetch = (url: string, init: { method: "POST" | "GET"; headers: Record<string, string>; signal: AbortSignal }) => Promise<Response>;

export interface AksEndpointRequest {
  readonly resourceId: AksResourceId;
  readonly credential: TokenCredential;
  /** https://management.azure.com, or a sovereign cloud's; its origin also names the token scope. */
  readonly armEndpoint: string;
  readonly fetch?: ArmFetch;
  readonly apiVersion?: string;
  /** The longest one ARM call may take, and separately the token for it, whether or not they heed their signal. Default 15 s. */
  readonly timeoutMs?: number;
  /** Transient answers (429, 5xx, no answer) are tried this many times in all. Default 3. */
  readonly attempts?: number;
  /** Wait before the second attempt, doubled for each later one. Default 500 ms. */
  readonly retryDelayMs?: number;
}

export class ArmRequestError extends Error {
  readonly httpStatus: number | undefined;
  /** Worth trying again: a 429, a 5xx, or no answer at all. */
  readonly transient: boolean;
  constructor(message: string, details: { httpStatus?: number; transient?: boolean; cause?: unknown } = {}) {
    super(message, { cause: details.cause });
    this.name = "ArmRequestError";
    this.httpStatus = details.httpStatus;
    this.transient = details.transient ?? false;
  }
}

/** Checks an ARM endpoint setting and returns its origin (no path, no trailing slash). */
export function armEndpointOrigin(value: string): string {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ArmRequestError(`the ARM endpoint "${value.slice(0, 200)}" is not a URL`);
  }
  if (url.protocol !== "https:") throw new ArmRequestError(`the ARM endpoint must be https, not ${url.protocol.replace(/:$/, "")}`);
  if ((url.pathname !== "/" && url.pathname !== "") || url.search || url.hash || url.username) {
    throw new ArmRequestError(`the ARM endpoint must be an origin such as ${defaultArmEndpoint}, with no path, query or credentials`);
  }
  return url.origin;
}

export function armScope(armEndpoint: string): string {
  return `${armEndpointOrigin(armEndpoint)}/.default`;
}

const CredentialResults = t.type({ kubeconfigs: t.array(t.type({ value: t.string })) });

const ArmErrorBody = t.type({ error: t.partial({ code: t.string, message: t.string }) });

const KubeconfigClusters = t.intersection([
  t.type({
    clusters: t.array(
      t.type({
        name: t.string,
        cluster: t.intersection([t.type({ server: t.string }), t.partial({ "certificate-authority-data": t.string })]),
      }),
    ),
  }),
  t.partial({
    "current-context": t.string,
    contexts: t.array(t.type({ name: t.string, context: t.type({ cluster: t.string }) })),
  }),
]);

const ManagedClusterNames = t.type({
  properties: t.partial({ fqdn: t.string, privateFQDN: t.string, azurePortalFQDN: t.string }),
});

function clusterPath(id: AksResourceId): string {
  return ["subscriptions", id.subscriptionId, "resourceGroups", id.resourceGroup, "providers", "Microsoft.ContainerService", "managedClusters", id.clusterName]
    .map(encodeURIComponent)
    .join("/");
}

function armUrl(request: AksEndpointRequest, path: string): string {
  return `${armEndpointOrigin(request.armEndpoint)}/${path}?api-version=${encodeURIComponent(request.apiVersion ?? aksArmApiVersion)}`;
}

/**
 * What reads made together share: the ARM token, and a signal that says the other read failed,
 * after which a read tries no more. A read made alone asks for its token at each attempt.
 */
interface SharedRead {
  readonly token: () => Promise<string>;
  readonly givenUp: AbortSignal;
}

export async function fetchAksEndpoint(request: AksEndpointRequest, shared?: SharedRead): Promise<ApiServerEndpoint> {
  const url = armUrl(request, `${clusterPath(request.resourceId)}/listClusterUserCredential`);
  const what = `listClusterUserCredential for ${request.resourceId.id}`;
  const body = await sendWithRetries("POST", url, what, request, shared);
  return endpointFromCredentialResults(body, what);
}

/**
 * The managed cluster's declared host names and its endpoint, read at once: a new instance
 * waits for one ARM round trip instead of two. They share one ARM token, asked once: two reads
 * asking at the same moment would each go to the identity endpoint before its cache held one.
 */
export async function readManagedCluster(request: AksEndpointRequest): Promise<{ readonly hostNames: string[]; readonly endpoint: ApiServerEndpoint }> {
  let asked: Promise<string> | undefined;
  const givenUp = new AbortController();
  const shared: SharedRead = { token: () => (asked ??= armToken(request)), givenUp: givenUp.signal };
  // Once one read fails, start-up fails with it: the other makes no more attempts.
  const failing = <T>(read: Promise<T>) =>
    read.catch((error: unknown) => {
      givenUp.abort();
      throw error;
    });
  const [hostNames, endpoint] = await Promise.all([failing(fetchManagedClusterHostNames(request, shared)), failing(fetchAksEndpoint(request, shared))]);
  return { hostNames, endpoint };
}

/**
 * The host names the managed cluster resource declares for its API server: `fqdn`,
 * `privateFQDN` and `azurePortalFQDN`, lower case, without the ones it does not have.
 */
export async function fetchManagedClusterHostNames(request: AksEndpointRequest, shared?: SharedRead): Promise<string[]> {
  const url = armUrl(request, clusterPath(request.resourceId));
  const what = `the managed cluster ${request.resourceId.id}`;
  const body = await sendWithRetries("GET", url, what, request, shared);
  const decoded = ManagedClusterNames.decode(body);
  if (isLeft(decoded)) throw new ArmRequestError(`the answer to a read of ${what} ${decodeFailure(decoded.left)}`);
  const { fqdn, privateFQDN, azurePortalFQDN } = decoded.right.properties;
  const names = [fqdn, privateFQDN, azurePortalFQDN].filter((name): name is string => typeof name === "string" && name.trim() !== "");
  if (names.length === 0) throw new ArmRequestError(`${what} declares no API server host name (properties.fqdn, privateFQDN)`);
  return names.map((name) => name.trim().toLowerCase().replace(/\.$/, ""));
}

async function sendWithRetries(method: "POST" | "GET", url: string, what: string, request: AksEndpointRequest, shared: SharedRead | undefined): Promise<unknown> {
  const attempts = Math.max(1, request.attempts ?? 3);
  const retryDelayMs = request.retryDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await sendOnce(method, url, what, request, await (shared ? shared.token() : armToken(request)));
    } catch (error) {
      if (!(error instanceof ArmRequestError) || !error.transient || attempt >= attempts) throw error;
      // The wait ends at once when the other read has failed, or fails meanwhile.
      await sleep(retryDelayMs * 2 ** (attempt - 1), undefined, shared ? { signal: shared.givenUp } : {}).catch(() => undefined);
      if (shared?.givenUp.aborted) throw error;
    }
  }
}

const defaultTimeoutMs = 15_000;

/** A token for ARM from the credential, within the time one call may take. */
async function armToken(request: AksEndpointRequest): Promise<string> {
  const scope = armScope(request.armEndpoint);
  const timeoutMs = request.timeoutMs ?? defaultTimeoutMs;
  try {
    const access = await settleWithin(
      timeoutMs,
      (signal) => request.credential.getToken(scope, { abortSignal: signal }),
      () => new Error(`the credential did not answer within ${timeoutMs} ms`),
    );
    if (!access?.token) throw new Error("the credential returned no token");
    return access.token;
  } catch (error) {
    // Not retried here: the credential retries on its own, and the next re-read tries again.
    throw new ArmRequestError(`could not get a Microsoft Entra token for Azure Resource Manager (scope ${scope}): ${firstLine(error)}`, { cause: error });
  }
}

async function sendOnce(method: "POST" | "GET", url: string, what: string, request: AksEndpointRequest, token: string): Promise<unknown> {
  const timeoutMs = request.timeoutMs ?? defaultTimeoutMs;
  const send = request.fetch ?? fetch;
  let response: Response;
  let text: string;
  try {
    // The answer and its body within the time allowed, even from a fetch that ignores its signal.
    ({ response, text } = await settleWithin(
      timeoutMs,
      async (signal) => {
        const answer = await send(url, { method, headers: { Authorization: `Bearer ${token}`, Accept: "application/json" }, signal });
        return { response: answer, text: await answer.text() };
      },
      () => new Error(`no answer within ${timeoutMs} ms`),
    ));
  } catch (error) {
    throw new ArmRequestError(`Azure Resource Manager did not answer ${what}: ${firstLine(error)}`, { transient: true, cause: error });
  }
  if (response.status !== 200) {
    const status = response.status;
    throw new ArmRequestError(`Azure Resource Manager answered ${status} to ${what}${armErrorDetail(text)}`, { httpStatus: status, transient: status === 429 || status >= 500 });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ArmRequestError(`Azure Resource Manager answered ${what} with a body that is not JSON`, { httpStatus: response.status });
  }
}

/** Decodes the CredentialResults body down to the API server's URL and CA. */
export function endpointFromCredentialResults(body: unknown, what: string): ApiServerEndpoint {
  const results = CredentialResults.decode(body);
  if (isLeft(results)) throw new ArmRequestError(`the answer to ${what} ${decodeFailure(results.left)}`);
  const first = results.right.kubeconfigs[0];
  if (!first) throw new ArmRequestError(`the answer to ${what} holds no kubeconfig`);
  if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(first.value)) throw new ArmRequestError(`the kubeconfig in the answer to ${what} is not base64`);
  let document: unknown;
  try {
    document = parseYaml(Buffer.from(first.value, "base64").toString("utf8"));
  } catch {
    // The parser's message quotes the text, which may hold a secret: say no more than this.
    throw new ArmRequestError(`the kubeconfig in the answer to ${what} is not YAML`);
  }
  const decoded = KubeconfigClusters.decode(document);
  if (isLeft(decoded)) throw new ArmRequestError(`the kubeconfig in the answer to ${what} ${decodeFailure(decoded.left)}`);
  const kubeconfig = decoded.right;
  const currentCluster = kubeconfig.contexts?.find((c) => c.name === kubeconfig["current-context"])?.context.cluster;
  const cluster = kubeconfig.clusters.find((c) => c.name === currentCluster) ?? kubeconfig.clusters[0];
  if (!cluster) throw new ArmRequestError(`the kubeconfig in the answer to ${what} names no cluster`);
  const where = `the kubeconfig in the answer to ${what}`;
  const caData = cluster.cluster["certificate-authority-data"];
  if (!caData) throw new ArmRequestError(`${where} has no clusters[].cluster.certificate-authority-data`);
  return { server: apiServerUrl(cluster.cluster.server, where), caPem: caBundlePem(caData, where) };
}

/** Where decoding failed, as paths only: the values may be secrets. */
function decodeFailure(errors: t.Errors): string {
  const found = [
    ...new Set(
      errors.map((e) =>
        e.context
          .map((c) => c.key)
          .filter((k) => k !== "" && !/^\d+$/.test(k))
          .join("."),
      ),
    ),
  ];
  if (found.includes("")) return "is not an object";
  return `has no valid ${found.slice(0, 3).join(", ")}${found.length > 3 ? ` (and ${found.length - 3} more)` : ""}`;
}

function armErrorDetail(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return "";
  }
  const decoded = ArmErrorBody.decode(body);
  if (isLeft(decoded)) return "";
  const { code, message } = decoded.right.error;
  const detail = [code, message && firstLine(message)].filter(Boolean).join(": ");
  return detail ? ` (${detail})` : "";
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const line = text.split("\n", 1)[0]!.trim();
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}
