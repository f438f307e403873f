import type { Pod } from "./pod.js";

/**
 * Windows gives a container the first 15 characters of its hostname as its NetBIOS name, and a
 * gMSA's tickets are bound to that name. Pods of one workload (a controller's, or named from a
 * generateName) share everything before their last few characters, so with a hostname longer
 * than this they present one NetBIOS name between them, and Active Directory sees them as one
 * machine: their authentications clash. A longer hostname on a pod of its own is harmless.
 */
export const netBiosNameLength = 15;

/** Characters the API server appends to a generateName. */
const generatedSuffixLength = 5;

/**
 * The warning for a GMSA pod of a workload whose hostname is longer than a NetBIOS name, or
 * undefined. `podLabel` names the pod as the other messages do; `credSpecs` are the names it uses.
 */
export function sharedHostnameWarning(pod: Pod, podLabel: string, credSpecs: readonly string[]): string | undefined {
  const metadata = pod.metadata;
  const ofWorkload = Boolean(metadata?.generateName) || (metadata?.ownerReferences ?? []).some((owner) => owner.controller === true);
  if (!ofWorkload || credSpecs.length === 0) return undefined;
  const hostname = pod.spec?.hostname || metadata?.name;
  const length = hostname ? [...hostname].length : [...(metadata?.generateName ?? "")].length + generatedSuffixLength;
  if (length <= netBiosNameLength) return undefined;
  const named = hostname ? `hostname "${hostname}"` : `hostname (its generated name, from "${metadata?.generateName}")`;
  return (
    `${podLabel}: its ${named} is longer than ${netBiosNameLength} characters, and Windows uses only its first ${netBiosNameLength} as the NetBIOS name, ` +
    `so the pods of its workload present one name to Active Directory with gMSA ${credSpecs.map((name) => `"${name}"`).join(", ")} and their authentications clash; ` +
    `set spec.hostname to at most ${netBiosNameLength} characters per pod, or turn on GMSA_RANDOM_HOSTNAME`
  );
}
