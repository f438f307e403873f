import { isIP } from "node:net";

/**
 * A kubeconfig may name an `http://` server: `kubectl proxy` serves the API on loopback that way
 * and adds the credentials itself. Plain HTTP to this machine is served as kubectl serves it;
 * plain HTTP anywhere else would let anyone on the path forge the API server's answers (and
 * read the token), so it is refused before the instance says it is healthy.
 */
export function isLoopbackHttp(server: string): boolean {
  const url = parseUrl(server);
  return url !== undefined && url.protocol === "http:" && isLoopbackHost(url.hostname);
}

/** Why this API server URL cannot be used, or undefined when it can. */
export function plainHttpProblem(server: string): string | undefined {
  const url = parseUrl(server);
  if (url === undefined || url.protocol !== "http:" || isLoopbackHost(url.hostname)) return undefined;
  return (
    `its API server ${url.origin} is plain HTTP on another host: the API server's answers decide admission and would travel ` +
    "unauthenticated, so use https (plain HTTP is accepted only for a proxy on this machine, such as kubectl proxy on 127.0.0.1)"
  );
}

function parseUrl(server: string): URL | undefined {
  try {
    return new URL(server);
  } catch {
    return undefined;
  }
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  // URL writes every spelling of the IPv6 loopback address as ::1.
  if (isIP(host) === 6) return host === "::1";
  return false;
}
