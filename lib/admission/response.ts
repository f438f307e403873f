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
  return { patch: encodePatch(patch), patchType: "JSONPatch" };
}

/**
 * The base64 of a patch's JSON. Most patches are one operation that inlines a credential spec:
 * its contents are the same string object for as long as the cache holds that spec, so such a
 * patch is encoded once per spec and path, not once per admission (the contents are a kilobyte of
 * escaped JSON, and encoding them was a tenth of a mutate). A few hundred are remembered.
 */
const encodedPatches = new Map<string, Map<string, string>>();
const maxEncodedContents = 256;

function encodePatch(patch: readonly PatchOperation[]): string {
  const encode = () => Buffer.from(JSON.stringify(patch)).toString("base64");
  const only = patch.length === 1 ? patch[0]! : undefined;
  if (!only || typeof only.value !== "string" || only.op !== "add") return encode();
  let byPath = encodedPatches.get(only.value);
  let encoded = byPath?.get(only.path);
  if (encoded !== undefined) return encoded;
  encoded = encode();
  if (!byPath) {
    if (encodedPatches.size >= maxEncodedContents) encodedPatches.delete(encodedPatches.keys().next().value!);
    byPath = new Map();
    encodedPatches.set(only.value, byPath);
  }
  if (byPath.size < maxEncodedContents) byPath.set(only.path, encoded);
  return encoded;
}
