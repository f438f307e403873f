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

export { clusterSecretHeader, clusterSecretSettingName, isMemberSecret, memberNamePattern, memberSecretRule } from "../lib/fleet/memberIdentity.js";

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
