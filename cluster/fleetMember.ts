/**
 * One cluster of a fleet as its wiring sees it: the member's name, which picks its paths on the
 * Function App, and the secret that proves a request comes from this member's wiring. The
 * function's side reads the same secret from GMSA_CLUSTER_SECRET_<NAME>.
 */
export interface FleetMember {
  readonly name: string;
  /** Never printed: it travels in the relay's Secret, or (url wiring) as a segment of the webhook URL. */
  readonly secret: string;
}

/** The header the relay adds with the member's secret. */
export const clusterSecretHeader = "x-gmsa-cluster-secret";

/** A DNS-1123 label, as the fleet's settings name members. */
export const memberNamePattern = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** URL-safe (it may be a path segment) and long enough not to be guessed; the function checks the same. */
export const memberSecretPattern = /^[A-Za-z0-9_-]{32,128}$/;

/** The function's setting that holds the member's secret(s): `-` becomes `_`, which a DNS label cannot hold. */
export function clusterSecretSettingName(name: string): string {
  return `GMSA_CLUSTER_SECRET_${name.toUpperCase().replace(/-/g, "_")}`;
}

/** The member's paths on the function: where the relay sends its reviews, the secret in a header. */
export function memberPathPrefix(name: string): string {
  return `/clusters/${name}`;
}

/**
 * Where the API server sends the member's reviews with url wiring. It sends no header of its
 * choosing and a webhook URL may carry no query or user-info: the path (inside TLS) is the only
 * per-webhook value it presents, so the secret is a segment of it.
 */
export function memberUrlPathPrefix(member: FleetMember): string {
  return `/clusters/${member.name}/${member.secret}`;
}
