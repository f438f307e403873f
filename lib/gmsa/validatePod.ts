import { authorizeCredSpecs } from "./authorizeCredSpecs.js";
import { checkBinding } from "./bindingRules.js";
import { gmsaSettings } from "./pod.js";
import { isBinding, type Admission, type PolicyDependencies } from "./podAdmission.js";
import { checkUpdate } from "./updateRules.js";
import { allowed, type Verdict } from "../webhook/verdict.js";

/**
 * The validating webhook: CREATE gets the use/existence/contents checks, UPDATE the freeze, and
 * a binding may not carry GMSA annotations onto the pod it binds.
 */
export async function validatePod(admission: Admission, deps: PolicyDependencies): Promise<Verdict> {
  if (isBinding(admission)) return checkBinding(admission);
  switch (admission.operation) {
    case "CREATE":
      return authorizeCredSpecs(admission, gmsaSettings(admission.pod, admission.name), deps);
    case "UPDATE":
      return checkUpdate(admission, deps);
    default:
      return allowed();
  }
}
