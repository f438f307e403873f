/**
 * The in-cluster safety net's objects, by name (rendered by lib/wiring/safetyNet.ts and
 * lib/wiring/safetyNetCredSpecs.ts): a ValidatingAdmissionPolicy each, and a binding of the same
 * name that denies what it refuses.
 */
export const safetyNetPodPolicyName = "gmsa-admission-pods";
export const safetyNetBindingPolicyName = "gmsa-admission-bindings";
export const safetyNetCredSpecPolicyName = "gmsa-admission-credentialspecs";

/** Every policy of the safety net; each has a binding of the same name. */
export const safetyNetPolicyNames = [safetyNetPodPolicyName, safetyNetBindingPolicyName, safetyNetCredSpecPolicyName] as const;

/** What every binding of the safety net holds: its policy, refusing with Deny, everywhere the policy matches. */
export function denyingBindingSpec(policyName: string) {
  return { policyName, validationActions: ["Deny"] };
}
