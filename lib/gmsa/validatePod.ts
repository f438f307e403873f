import { authorizeCredSpecs } from "./authorizeCredSpecs.js";
import { gmsaSettings } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { checkUpdate } from "./updateRules.js";
import { allowed, type Verdict } from "./verdict.js";

/** The validating webhook: CREATE gets the use/existence/contents checks, UPDATE the freeze. */
export async function validatePod(admission: PodAdmission, deps: PolicyDependencies): Promise<Verdict> {
  switch (admission.operation) {
    case "CREATE":
      return authorizeCredSpecs(admission, gmsaSettings(admission.pod, admission.name), deps);
    case "UPDATE":
      return checkUpdate(admission, deps);
    default:
      return allowed();
  }
}
