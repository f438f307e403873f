import type { PatchOperation } from "./jsonPatch.js";

/** What the policy decides about one pod. The envelope turns it into an AdmissionResponse. */
export type Verdict =
  | {
      readonly kind: "allowed";
      readonly patch: readonly PatchOperation[];
      readonly warnings: readonly string[];
      readonly credSpecs: readonly string[];
      /**
       * For the log only: the pod names credential specs the webhook left as they were (mutate
       * inlines nothing it may not), and why. Logged as the decision "unchanged", so that it is not
       * counted as a GMSA pod admitted.
       */
      readonly unchanged?: string;
    }
  | {
      readonly kind: "denied";
      readonly code: DenialCode;
      readonly message: string;
      readonly warnings: readonly string[];
      readonly credSpecs: readonly string[];
    };

/** 400: not a pod; 403: not authorized, or a change to a running pod; 422: the pod is wrong. */
export type DenialCode = 400 | 403 | 422;

export function allowed(options: { patch?: readonly PatchOperation[]; warnings?: readonly string[]; credSpecs?: readonly string[]; unchanged?: string } = {}): Verdict {
  return {
    kind: "allowed",
    patch: options.patch ?? [],
    warnings: options.warnings ?? [],
    credSpecs: options.credSpecs ?? [],
    ...(options.unchanged === undefined ? {} : { unchanged: options.unchanged }),
  };
}

export function denied(code: DenialCode, message: string, options: { warnings?: readonly string[]; credSpecs?: readonly string[] } = {}): Verdict {
  return { kind: "denied", code, message, warnings: options.warnings ?? [], credSpecs: options.credSpecs ?? [] };
}
