import type { AdmissionRequest } from "./request.js";
import type { Verdict } from "./verdict.js";

/**
 * The one shape every webhook's policy has: it decodes the request's object, then judges it over
 * the ports it needs (`P`), returning a Verdict. The envelope (lib/admission) runs every webhook
 * through this shape and knows nothing of pods, bindings or credential specs; the ports and the
 * admission's signal are all a policy is handed.
 */
export type WebhookPolicy<P> = (request: AdmissionRequest) => Decoded<P>;

/** What a policy made of a request. */
export type Decoded<P> =
  /** An object this webhook judges, bound to the judgement: run within the admission's signal. */
  | { readonly kind: "judge"; readonly judge: (ports: P, admission: AdmissionScope) => Promise<Verdict> }
  /** Nothing to judge (a DELETE, a CONNECT, an operation the webhook leaves alone): allowed unchanged. */
  | { readonly kind: "pass" }
  /** Not a request this webhook judges, or its object is not what it claims: refused with 400 and this reason. */
  | { readonly kind: "refuse"; readonly problem: string };

/**
 * What one admission is, for the ports: its deadline. (The namespace its calls are counted under
 * is the request's, which the policy has decoded: lib/gmsa/podWebhook.ts.)
 */
export interface AdmissionScope {
  /** Aborts when the admission's time budget is spent. */
  readonly signal: AbortSignal;
}
