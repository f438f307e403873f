import type { PatchOperation } from "../gmsa/jsonPatch.js";
import type { Verdict } from "../gmsa/verdict.js";
import type { AdmissionResponse, Status } from "./review.js";

/**
 * Every AdmissionResponse is built here, from a policy verdict or from a failure, so the
 * UID, the status shape and the patch encoding are right in one place.
 */
const reasons: Record<number, string> = {
  400: "BadRequest",
  403: "Forbidden",
  422: "Invalid",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

function status(code: number, message: string): Status {
  return { status: "Failure", code, reason: reasons[code] ?? "Unknown", message };
}

export function responseFor(uid: string, verdict: Verdict): AdmissionResponse {
  const extras = {
    ...(verdict.warnings.length > 0 ? { warnings: verdict.warnings } : {}),
    ...(verdict.credSpecs.length > 0 ? { auditAnnotations: { credspecs: verdict.credSpecs.join(",") } } : {}),
  };
  if (verdict.kind === "denied") return { uid, allowed: false, status: status(verdict.code, verdict.message), ...extras };
  return { uid, allowed: true, ...patchFields(verdict.patch), ...extras };
}

/** A failure that is not the pod's fault: refuse it (fail closed) and say why. */
export function failedClosed(uid: string, code: 500 | 503 | 504, message: string): AdmissionResponse {
  return { uid, allowed: false, status: status(code, message) };
}

function patchFields(patch: readonly PatchOperation[]): Pick<AdmissionResponse, "patch" | "patchType"> {
  if (patch.length === 0) return {};
  return { patch: Buffer.from(JSON.stringify(patch)).toString("base64"), patchType: "JSONPatch" };
}
