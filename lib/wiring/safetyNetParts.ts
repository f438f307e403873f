import { denyingBindingSpec } from "./safetyNetNames.js";

/**
 * What every policy of the in-cluster safety net shares (lib/wiring/safetyNet.ts,
 * lib/wiring/safetyNetCredSpecs.ts): its labels, how its refusals begin, CEL string literals, and
 * the policy object with a binding that denies what it refuses.
 */
const safetyNetLabels = { "app.kubernetes.io/name": "gmsa-admission", "app.kubernetes.io/component": "safety-net" };

/** The start of every refusal of the safety net: the check that refused is the in-cluster one. */
export const safetyNetWho = "the in-cluster policy of gmsa-admission";

/** A CEL string literal. */
export const celString = (text: string) => `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/**
 * A safety net policy, failing closed, and its binding: `spec` is everything else the policy
 * says (its match, conditions, variables and validations).
 */
export function denyingPolicy(name: string, spec: Record<string, unknown>) {
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name, labels: safetyNetLabels },
      spec: { failurePolicy: "Fail", ...spec },
    },
    denyingBinding(name),
  ];
}

/** The binding of a safety net policy: everywhere its own match says, refusing what it refuses. */
function denyingBinding(policyName: string) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name: policyName, labels: safetyNetLabels },
    spec: denyingBindingSpec(policyName),
  };
}
