import { isLeft } from "fp-ts/Either";
import { describeDecodeErrors } from "./decodeErrors.js";
import { Pod } from "../gmsa/pod.js";
import type { PodAdmission, PolicyDependencies, PolicySettings } from "../gmsa/podAdmission.js";
import { ClusterUnavailableError, type CredSpecSource, type UseAuthorizer } from "../gmsa/ports.js";
import { denied, type Verdict } from "../gmsa/verdict.js";
import { withRequestCounters } from "../observability/requestCounters.js";
import type { AdmissionRecord } from "../observability/admissionLog.js";
import { AdmissionReview, type AdmissionRequest, type AdmissionResponse, type AdmissionReviewResponse } from "./review.js";
import { failedClosed, responseFor } from "./response.js";

export type WebhookPolicy = (admission: PodAdmission, deps: PolicyDependencies) => Promise<Verdict>;

export interface ReviewDependencies {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly settings: PolicySettings;
  /** The most an admission may take, whatever the API server asks for. */
  readonly budgetMs: number;
}

export type ReviewOutcome =
  | { readonly kind: "badRequest"; readonly message: string }
  | { readonly kind: "reviewed"; readonly review: AdmissionReviewResponse; readonly record: Omit<AdmissionRecord, "webhook" | "latencyMs" | "coldStart"> };

// Leave the API server time to receive the answer before it gives up on the webhook (the relay
// sizes its own timeout from it: cluster/relay.ts).
export const answerMarginMs = 250;

/**
 * Decodes an AdmissionReview, runs a policy on the pod within the time the API server allows,
 * and encodes the answer in the version that was asked. Policy denials, malformed requests and
 * failures of the cluster stay three different things.
 */
export async function handleReview(
  body: unknown,
  policy: WebhookPolicy,
  deps: ReviewDependencies,
  apiServerTimeoutMs?: number,
): Promise<ReviewOutcome> {
  const decoded = AdmissionReview.decode(body);
  if (isLeft(decoded)) return { kind: "badRequest", message: `the body is not an AdmissionReview: ${describeDecodeErrors(decoded.left)}` };
  const { apiVersion, request } = decoded.right;

  const budget = Math.max(1, Math.min(deps.budgetMs, (apiServerTimeoutMs ?? Infinity) - answerMarginMs));
  // A timer of our own rather than AbortSignal.timeout: it must keep the process alive while
  // an admission waits on it.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`admission budget of ${budget} ms spent`)), budget);
  const { result: response, counters } = await withRequestCounters(() =>
    respond(request, policy, { ...deps, signal: deadline.signal }, budget),
  ).finally(() => clearTimeout(timer));
  const code = response.status?.code ?? 200;
  return {
    kind: "reviewed",
    review: { apiVersion, kind: "AdmissionReview", response },
    record: {
      ...counters,
      operation: request.operation,
      uid: request.uid,
      namespace: request.namespace ?? "",
      pod: request.name ?? "",
      decision: response.allowed ? (response.patch ? "patched" : "allowed") : code >= 500 ? "error" : "denied",
      code,
      reason: response.status?.reason ?? "",
      credSpecs: response.auditAnnotations?.credspecs?.split(",") ?? [],
    },
  };
}

async function respond(
  request: AdmissionRequest,
  policy: WebhookPolicy,
  deps: PolicyDependencies,
  budgetMs: number,
): Promise<AdmissionResponse> {
  const admission = podAdmission(request);
  if ("problem" in admission) return responseFor(request.uid, denied(400, admission.problem));
  if (!admission.admission) return { uid: request.uid, allowed: true };
  try {
    // Whatever a port does with the signal, the answer leaves when the budget is spent.
    return responseFor(request.uid, await Promise.race([policy(admission.admission, deps), whenAborted(deps.signal)]));
  } catch (error) {
    if (error instanceof ClusterUnavailableError) {
      return failedClosed(request.uid, error.failure === "timeout" ? 504 : 503, `GMSA admission could not be checked: ${error.message}`);
    }
    if (deps.signal.aborted) {
      return failedClosed(request.uid, 504, `GMSA admission could not be checked: the Kubernetes API server did not answer within ${budgetMs} ms`);
    }
    // A bug, not the pod's fault and not the cluster's: refuse the pod, keep the UID, and let
    // the caller log what happened.
    reportUnexpected(error);
    return failedClosed(request.uid, 500, "GMSA admission failed unexpectedly; the pod was not admitted");
  }
}

// One turn late, so that a port which does stop at the signal gets to give its own, more
// precise reason first.
function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const late = () => setImmediate(() => reject(signal.reason));
    if (signal.aborted) late();
    else signal.addEventListener("abort", late, { once: true });
  });
}

function reportUnexpected(error: unknown): void {
  console.error(`GMSA admission: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
}

/** A pod admission, nothing to check (DELETE, CONNECT), or why the request is not one. */
function podAdmission(request: AdmissionRequest): { admission?: PodAdmission } | { problem: string } {
  const { kind } = request;
  if (kind.group !== "" || kind.kind !== "Pod") return { problem: `expected a Pod, got ${kind.kind || "no kind"}${kind.group ? ` (${kind.group})` : ""}` };
  const operation = request.operation;
  if (operation === "DELETE" || operation === "CONNECT") return {};
  if (operation !== "CREATE" && operation !== "UPDATE") return { problem: `unknown operation "${operation}"` };
  const pod = decodePod(request.object, "object");
  if ("problem" in pod) return pod;
  let oldPod: Pod | undefined;
  if (operation === "UPDATE") {
    const old = decodePod(request.oldObject, "oldObject");
    if ("problem" in old) return old;
    oldPod = old.pod;
  }
  return {
    admission: {
      operation,
      subResource: request.subResource,
      namespace: request.namespace || pod.pod.metadata?.namespace || "default",
      name: request.name || pod.pod.metadata?.name || undefined,
      pod: pod.pod,
      oldPod,
      userInfo: request.userInfo,
    },
  };
}

function decodePod(value: unknown, field: string): { pod: Pod } | { problem: string } {
  if (value === undefined || value === null) return { problem: `the request has no ${field}` };
  const decoded = Pod.decode(value);
  if (isLeft(decoded)) return { problem: `the request ${field} is not a Pod: ${describeDecodeErrors(decoded.left)}` };
  return { pod: decoded.right };
}

