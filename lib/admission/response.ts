import type { PatchOperation } from "../webhook/jsonPatch.js";
import type { Verdict } from "../webhook/verdict.js";
import type { AdmissionResponse, AdmissionReviewResponse, Status } from "./review.js";

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
/** Every encoding `encodedPatches` holds: base64 made here, which needs no escaping in JSON. */
const remembered = new Set<string>();

function encodePatch(patch: readonly PatchOperation[]): string {
  const encode = () => Buffer.from(JSON.stringify(patch)).toString("base64");
  const only = patch.length === 1 ? patch[0]! : undefined;
  if (!only || typeof only.value !== "string" || only.op !== "add") return encode();
  let byPath = encodedPatches.get(only.value);
  let encoded = byPath?.get(only.path);
  if (encoded !== undefined) return encoded;
  encoded = encode();
  if (!byPath) {
    if (encodedPatches.size >= maxEncodedContents) {
      const [oldest, paths] = encodedPatches.entries().next().value!;
      for (const old of paths.values()) remembered.delete(old);
      encodedPatches.delete(oldest);
    }
    byPath = new Map();
    encodedPatches.set(only.value, byPath);
  }
  if (byPath.size < maxEncodedContents) {
    byPath.set(only.path, encoded);
    remembered.add(encoded);
  }
  return encoded;
}

const patchKey = '"patch":"';

/**
 * The JSON text of an answer: exactly what JSON.stringify writes for it. A patch is a kilobyte
 * or more of base64, and Node 22's JSON.stringify checks a string for characters to escape one
 * by one (as costly as encoding the patch was); a patch encoded above is base64, which has none,
 * so it is written in as it is. Any other patch, which this cannot vouch for without reading it
 * character by character, goes through JSON.stringify. `"patch":""` can stand in the text only
 * as that one key: inside any string value its quotes would be escaped.
 */
export function encodeReview(review: AdmissionReviewResponse): string {
  const { patch } = review.response;
  if (patch === undefined || !remembered.has(patch)) return JSON.stringify(review);
  const text = JSON.stringify({ ...review, response: { ...review.response, patch: "" } });
  const at = text.indexOf(`${patchKey}"`) + patchKey.length;
  return `${text.slice(0, at)}${patch}${text.slice(at)}`;
}
