import { gmsaAnnotationKeys } from "./pod.js";
import type { BindingAdmission } from "./podAdmission.js";
import { allowed, denied, type Verdict } from "../webhook/verdict.js";

/**
 * A binding copies its annotations onto a pod that already runs under the identity it was
 * admitted with, past every pod UPDATE check. Any GMSA alpha annotation on a binding would
 * change that identity, so it is refused like any other change to a running pod's GMSA settings.
 */
export function checkBinding(admission: BindingAdmission): Verdict {
  const keys = gmsaAnnotationKeys(admission.binding.metadata?.annotations ?? {});
  if (keys.length === 0) return allowed();
  const pod = admission.name || admission.binding.metadata?.name;
  const shown = keys.slice(0, 3).map((k) => (k.length > 320 ? `${k.slice(0, 320)}…` : k));
  return denied(
    403,
    `binding of ${pod ? `pod "${pod}"` : "a pod"}: GMSA settings cannot be changed on an existing pod (the binding would set the annotation${keys.length > 1 ? "s" : ""} ${shown.join(", ")}${keys.length > 3 ? ` and ${keys.length - 3} more` : ""})`,
  );
}
