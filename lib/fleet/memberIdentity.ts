/**
 * What names a fleet member and proves a request comes from its wiring, in one place: the
 * function's settings and router read these, and so does the wiring command that renders the
 * member's webhook configurations and relay.
 */

/** A DNS-1123 label: how GMSA_CLUSTERS names a member, and a segment of its paths. */
export const memberNamePattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** One member secret: URL-safe (url wiring carries it as a path segment) and too long to guess. */
export const memberSecretPattern = /^[A-Za-z0-9_-]{32,128}$/;

/** The header in which the relay presents its member's secret. */
export const clusterSecretHeader = "x-gmsa-cluster-secret";

/** The app setting that holds a member's secret: the name upper-cased, `-` as `_` (a DNS label has no `_`, so no two names share one). */
export function clusterSecretSettingName(name: string): string {
  return `GMSA_CLUSTER_SECRET_${name.toUpperCase().replaceAll("-", "_")}`;
}
