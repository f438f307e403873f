import { isLeft } from "fp-ts/Either";
import { randomUUID } from "node:crypto";
import { describeDecodeErrors } from "../decodeErrors.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";
import type { WebhookPolicy } from "../webhook/policy.js";
import type { AdmissionRequest } from "../webhook/request.js";
import { denied } from "../webhook/verdict.js";
import { checkedDecode } from "../checkedDecode.js";
import { withRequestCounters } from "../observability/requestCounters.js";
import type { AdmissionRecord } from "../observability/admissionLog.js";
import { AdmissionReviewEnvelope, decodeReviewRequest, type AdmissionResponse, type AdmissionReviewResponse } from "./review.js";
import { failedClosed, responseFor } from "./response.js";
import { admissionDeadline, type Deadline } from "./deadline.js";

/** How long any admission may take, whatever the API server asks for; passed with the policy's ports. */
export interface ReviewBudget {
  readonly budgetMs: number;
}

export type ReviewOutcome =
  | { readonly kind: "badRequest"; readonly message: string }
  | { readonly kind: "reviewed"; readonly review: AdmissionReviewResponse; readonly record: Omit<AdmissionRecord, "cluster" | "webhook" | "latencyMs" | "coldStart"> };

// Leave the API server time to receive the answer before it gives up on the webhook (the relay
// sizes its own timeout from it: cluster/relay.ts).
export const answerMarginMs = 250;

/**
 * Decodes an AdmissionReview, runs a policy on the pod within the time the API server allows,
 * and encodes the answer in the version that was asked. Policy denials, malformed requests and
 * failures of the cluster stay three different things. Once the body shows itself an
 * AdmissionReview with a UID, whatever else is wrong with it is answered as an AdmissionReview
 * with that UID, so the API server reports the reason instead of a failed call. `body` is what
 * JSON.parse made of the request body (the decodes rely on it: see `checkedDecode`).
 */
export async function handleReview<P extends ReviewBudget>(body: unknown, policy: WebhookPolicy<P>, ports: P, apiServerTimeoutMs?: number): Promise<ReviewOutcome> {
  const envelope = checkedDecode(AdmissionReviewEnvelope, body);
  if (isLeft(envelope)) return { kind: "badRequest", message: `the body is not an AdmissionReview: ${describeDecodeErrors(envelope.left)}` };
  const { apiVersion } = envelope.right;
  const { uid } = envelope.right.request;
  const decoded = decodeReviewRequest(body);
  const request = isLeft(decoded) ? undefined : decoded.right;

  const budget = Math.max(1, Math.min(ports.budgetMs, (apiServerTimeoutMs ?? Infinity) - answerMarginMs));
  // Not AbortSignal.timeout: the deadline must keep the process alive while an admission waits on it.
  const deadline = admissionDeadline(budget);
  const { result: answer, counters } = await withRequestCounters(deadline.signal, async (): Promise<Answer> =>
    isLeft(decoded)
      ? { response: responseFor(uid, denied(400, `the admission request is malformed: ${describeDecodeErrors(decoded.left)}`)) }
      : respond(decoded.right, policy, ports, deadline, budget),
  ).finally(() => deadline.finish());
  const { response, failure, unchanged } = answer;
  const code = response.status?.code ?? 200;
  return {
    kind: "reviewed",
    review: { apiVersion, kind: "AdmissionReview", response },
    record: {
      ...counters,
      operation: request?.operation ?? "",
      dryRun: request?.dryRun === true,
      uid,
      namespace: request?.namespace ?? "",
      pod: request?.name ?? "",
      decision: response.allowed ? (unchanged !== undefined ? "unchanged" : response.patch ? "patched" : "allowed") : code >= 500 ? "error" : code === 400 ? "invalid" : "denied",
      code,
      reason: response.status?.reason ?? unchanged ?? "",
      credSpecs: response.auditAnnotations?.credspecs?.split(",") ?? [],
      correlationId: failure?.correlationId ?? "",
      detail: failure?.detail ?? "",
    },
  };
}

/** What went wrong, for the log only: the pod creator is told the correlation ID and plain words. */
interface FailureDetail {
  readonly correlationId: string;
  readonly detail: string;
}

interface Answer {
  readonly response: AdmissionResponse;
  readonly failure?: FailureDetail;
  /** The policy allowed the pod but left the credential specs it names as they were: why (the log's decision "unchanged"). */
  readonly unchanged?: string;
}

async function respond<P>(request: AdmissionRequest, policy: WebhookPolicy<P>, ports: P, deadline: Deadline, budgetMs: number): Promise<Answer> {
  try {
    const decoded = policy(request);
    if (decoded.kind === "refuse") return { response: responseFor(request.uid, denied(400, decoded.problem)) };
    if (decoded.kind === "pass") return { response: { uid: request.uid, allowed: true } };
    // Whatever a port does with the signal, the answer leaves when the budget is spent.
    const verdict = await Promise.race([decoded.judge(ports, { signal: deadline.signal }), deadline.expired()]);
    return { response: responseFor(request.uid, verdict), ...(verdict.kind === "allowed" && verdict.unchanged !== undefined ? { unchanged: verdict.unchanged } : {}) };
  } catch (error) {
    const correlationId = randomUUID();
    const failure = { correlationId, detail: describeFailure(error) };
    if (error instanceof ClusterUnavailableError) {
      const code = error.failure === "timeout" ? 504 : 503;
      return { response: failedClosed(request.uid, code, plainFailure(whatHappened(error), correlationId)), failure };
    }
    if (deadline.signal.aborted) {
      return { response: failedClosed(request.uid, 504, plainFailure(`the Kubernetes API server did not answer within ${budgetMs} ms`, correlationId)), failure };
    }
    // A bug, not the pod's fault and not the cluster's: refuse the pod, keep the UID, and let
    // the caller log what happened.
    reportUnexpected(error, correlationId);
    return { response: failedClosed(request.uid, 500, `GMSA admission failed unexpectedly; the pod was not admitted (correlation ID ${correlationId})`), failure };
  }
}

/**
 * Whoever creates a pod reads this message through kubectl. Host names, addresses, ports,
 * certificate problems and identity errors describe the webhook's own infrastructure, so they
 * go to the log under the correlation ID and the message says only what kind of failure it was.
 */
function whatHappened(error: ClusterUnavailableError): string {
  switch (error.failure) {
    case "timeout":
      return "the Kubernetes API server did not answer in time";
    case "unreachable":
      return "the Kubernetes API server could not be reached";
    case "serverError":
      return `the Kubernetes API server answered with an error${error.httpStatus !== undefined ? ` (HTTP ${error.httpStatus})` : ""}`;
    case "rejected":
      return "the webhook's own access to the cluster failed";
    case "backedUp":
      return "too many admissions are already waiting for the Kubernetes API server";
  }
}

function plainFailure(what: string, correlationId: string): string {
  return `GMSA admission could not be checked: ${what}; the pod was not admitted (correlation ID ${correlationId})`;
}

const maxDetailLength = 1000;

/** The error and its causes on one line, for the log. */
function describeFailure(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current !== undefined; depth++) {
    parts.push(current instanceof Error ? `${current.name}: ${current.message}` : String(current));
    current = current instanceof Error ? current.cause : undefined;
  }
  const line = parts.join(" <- ").replace(/\s+/g, " ").trim();
  return line.length > maxDetailLength ? `${line.slice(0, maxDetailLength)}…` : line;
}

function reportUnexpected(error: unknown, correlationId: string): void {
  console.error(`GMSA admission: unexpected failure (correlation ID ${correlationId}): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
}
