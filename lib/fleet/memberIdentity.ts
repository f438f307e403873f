/**
 * What names a fleet member and proves a request comes from its wiring, in one place: the
 * function's settings and router read these, and so does the wiring command that renders the
 * member's webhook configurations and relay.
 */

/** A DNS-1123 label: how GMSA_CLUSTERS names a member, and a segment of its paths. */
export const memberNamePattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** One member secret: URL-safe (url wiring carries it as a path segment) and too long to guess. */
const memberSecretPattern = /^[A-Za-z0-9_-]{32,128}$/;

/**
 * The fewest different characters a member secret must use. Long is not enough: `aaaa…` or
 * `abab…` is as easy to guess as it is to type. A random secret passes: 64 random hex digits
 * (`openssl rand -hex 32`) use fewer than 10 of the 16 about once in a trillion, 32 random
 * base64url characters far less often (32 hex digits would, about once in 10,000).
 */
export const memberSecretMinDistinct = 10;

/** What a member secret must be, for messages (which never quote the value). */
export const memberSecretRule = `32 to 128 characters of A-Z, a-z, 0-9, _ and -, at least ${memberSecretMinDistinct} of them different (a random value, as from \`openssl rand -hex 32\`)`;

/** True for a value that may be a member secret: the pattern, and not a repetition of a few characters. */
export function isMemberSecret(value: string): boolean {
  return memberSecretPattern.test(value) && new Set(value).size >= memberSecretMinDistinct;
}

/** The header in which the relay presents its member's secret. */
export const clusterSecretHeader = "x-gmsa-cluster-secret";

/** The app setting that holds a member's secret: the name upper-cased, `-` as `_` (a DNS label has no `_`, so no two names share one). */
export function clusterSecretSettingName(name: string): string {
  return `GMSA_CLUSTER_SECRET_${name.toUpperCase().replaceAll("-", "_")}`;
}
