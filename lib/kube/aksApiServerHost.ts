import { isIP } from "node:net";

/**
 * Which API server may receive the webhook's Microsoft Entra token. The token's audience is the
 * AKS server application, the same for every Entra-integrated AKS cluster in the tenant: sent
 * to the wrong host, it opens them all. So the address that listClusterUserCredential gives is
 * not taken on trust: it must be one of the host names the managed cluster resource declares
 * for itself, on port 443, under a domain where AKS serves API servers.
 */

/**
 * Domains under which AKS serves API servers, public and private (the `privatelink` zones and
 * their subzones sit under the same domains): Azure public cloud, Azure Government, and Azure
 * operated by 21Vianet.
 */
export const aksApiServerDomains = ["azmk8s.io", "cx.aks.containerservice.azure.us", "cx.prod.service.azk8s.cn"] as const;

export class ApiServerHostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ApiServerHostError";
  }
}

export interface ApiServerHostRules {
  /** Lower-case host names from the managed cluster resource (fqdn, privateFQDN, azurePortalFQDN). */
  readonly clusterHostNames: readonly string[];
  /**
   * For the product's own tests only, which run a real API server on loopback: accept a
   * loopback host on any port in place of the AKS domain and port 443. It still has to be one
   * of the cluster's host names. No setting reaches it.
   */
  readonly loopbackForTests?: boolean;
}

const loopbackNames = new Set(["127.0.0.1", "::1", "[::1]", "localhost"]);

/** Throws ApiServerHostError unless `server` (an https URL already checked) may receive the token. */
export function checkAksApiServer(server: string, rules: ApiServerHostRules, where: string): void {
  const url = new URL(server);
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  const port = url.port === "" ? 443 : Number(url.port);
  const declared = rules.clusterHostNames.map((name) => name.toLowerCase());
  const refuse = (reason: string) =>
    new ApiServerHostError(
      `${where} gives the API server ${url.host}, which ${reason}; the webhook's token is sent only to the cluster's own API server (${declared.join(", ") || "none declared"}) on port 443`,
    );
  if (!declared.includes(host)) throw refuse("is not a host name the managed cluster declares (properties.fqdn, privateFQDN, azurePortalFQDN)");
  if (rules.loopbackForTests && loopbackNames.has(host)) return;
  if (isIP(host) !== 0) throw refuse("is an IP address, not an AKS host name");
  if (!aksApiServerDomains.some((domain) => host.endsWith(`.${domain}`))) throw refuse(`is not under a domain where AKS serves API servers (${aksApiServerDomains.join(", ")})`);
  if (port !== 443) throw refuse(`uses port ${port}`);
}

/** True for an https origin on a loopback address: the only ARM endpoint the test seam accepts. */
export function isLoopbackOrigin(origin: string): boolean {
  const url = new URL(origin);
  return url.protocol === "https:" && loopbackNames.has(url.hostname.toLowerCase());
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
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.split(".")[0] === "127";
  return isIP(bare) === 6 && bare === "::1";
}
