import { isLeft } from "fp-ts/Either";
import type { WebhookPolicy } from "../webhook/policy.js";
import type { AdmissionRequest } from "../webhook/request.js";
import { jsonEqual } from "../gmsa/canonicalJson.js";
import { credSpecObjectTooLarge, tooLargeReason } from "../gmsa/credSpecSize.js";
import { allowed, denied, type Verdict } from "../webhook/verdict.js";
import { checkCredSpec } from "./checkCredSpec.js";
import { GmsaCredentialSpecObject } from "./credSpecCodec.js";
import { describeFinding } from "./credSpecFindings.js";

/** At most this many problems are listed in one refusal; the rest are counted. */
export const maxListed = 8;

/**
 * The credential spec webhook: a GMSACredentialSpec that is no well-formed Windows credential
 * spec is refused (422) naming each field and what is wrong with it; one that is legal but
 * suspicious is admitted with warnings, which kubectl prints. An UPDATE that leaves `credspec`
 * as it was is admitted unchecked: labels, annotations and finalizers of an object that predates
 * these checks must stay manageable, and its contents are no worse than before.
 */
export function judgeCredSpecObject(request: AdmissionRequest): Verdict {
  const { kind } = request;
  if (kind.group !== "windows.k8s.io" || kind.kind !== "GMSACredentialSpec") {
    return denied(400, notACredSpec(kind));
  }
  if (request.operation !== "CREATE" && request.operation !== "UPDATE") return allowed();
  const decoded = GmsaCredentialSpecObject.decode(request.object);
  if (isLeft(decoded)) return denied(400, "the request object is not a GMSACredentialSpec");
  const name = request.name || decoded.right.metadata.name;
  const label = `GMSACredentialSpec "${name}"`;
  if (request.operation === "UPDATE") {
    const old = GmsaCredentialSpecObject.decode(request.oldObject);
    if (!isLeft(old) && jsonEqual(old.right.credspec, decoded.right.credspec)) return allowed({ credSpecs: [name] });
  }
  // Admission does not read a spec this large (credSpecSize.ts): refused here, it is never stored.
  if (credSpecObjectTooLarge(request.object)) {
    return denied(422, `${label} ${tooLargeReason}; the pod webhooks would refuse every pod naming it`, { credSpecs: [name] });
  }
  const report = checkCredSpec(decoded.right.credspec);
  const warnings = report.warnings.map((finding) => `${label}: ${describeFinding(finding)}`);
  if (report.errors.length === 0) return allowed({ warnings, credSpecs: [name] });
  const listed = report.errors.slice(0, maxListed).map(describeFinding).join("; ");
  const more = report.errors.length > maxListed ? ` (and ${report.errors.length - maxListed} more)` : "";
  return denied(422, `${label} is not a valid Windows credential spec: ${listed}${more}`, { warnings, credSpecs: [name] });
}

/** The credential spec webhook, in the shape every webhook has: it needs no port, the spec alone is judged. */
export const validateCredSpecObject: WebhookPolicy<unknown> = (request) => {
  const { kind } = request;
  if (kind.group !== "windows.k8s.io" || kind.kind !== "GMSACredentialSpec") return { kind: "refuse", problem: notACredSpec(kind) };
  if (request.operation !== "CREATE" && request.operation !== "UPDATE") return { kind: "pass" };
  return { kind: "judge", judge: async () => judgeCredSpecObject(request) };
};

function notACredSpec(kind: AdmissionRequest["kind"]): string {
  return `expected a GMSACredentialSpec (windows.k8s.io), got ${kind.kind || "no kind"}${kind.group ? ` (${kind.group})` : ""}`;
}
