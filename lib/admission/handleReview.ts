import { isLeft } from "fp-ts/Either";
import { randomUUID } from "node:crypto";
import { describeDecodeErrors } from "./decodeErrors.js";
import { decodePodObject, type Pod } from "../gmsa/pod.js";
import { Binding } from "../gmsa/binding.js";
import type { Admission, BindingAdmission, PolicyDependencies, PolicySettings } from "../gmsa/podAdmission.js";
import { ClusterUnavailableError, markAdmissionNamespace, type CredSpecSource, type UseAuthorizer } from "../gmsa/ports.js";
import { denied, type Verdict } from "../gmsa/verdict.js";
import { checkedDecode } from "../checkedDecode.js";
import { withRequestCounters } from "../observability/requestCounters.js";
import type { AdmissionRecord } from "../observability/admissionLog.js";
import { AdmissionReviewEnvelope, decodeReviewRequest, type AdmissionRequest, type AdmissionResponse, type AdmissionReviewResponse } from "./review.js";
import { failedClosed, responseFor } from "./response.js";
import { admissionDeadline, type Deadline } from "./deadline.js";

export type WebhookPolicy = (admission: Admission, deps: PolicyDependencies) => Promise<Verdict>;

/**
 * A policy for objects other than pods: it decodes the request's objects itself (a refusal of
 * 400 when they are not what it judges), behind the same envelope, budget and failure rules.
 */
export interface RequestPolicy {
  readonly judgeRequest: (request: AdmissionRequest, deps: PolicyDependencies) => Promise<Verdict>;
}

/** What a webhook runs: the pod policy, or one that reads the request's objects itself. */
export type ReviewPolicy = WebhookPolicy | RequestPolicy;

export interface ReviewDependencies {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly settings: PolicySettings;
  /** The most an admission may take, whatever the API server asks for. */
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
export async function handleReview(body: unknown, policy: ReviewPolicy, deps: ReviewDependencies, apiServerTimeoutMs?: number): Promise<ReviewOutcome> {
  const envelope = checkedDecode(AdmissionReviewEnvelope, body);
  if (isLeft(envelope)) return { kind: "badRequest", message: `the body is not an AdmissionReview: ${describeDecodeErrors(envelope.left)}` };
  const { apiVersion } = envelope.right;
  const { uid } = envelope.right.request;
  const decoded = decodeReviewRequest(body);
  const request = isLeft(decoded) ? undefined : decoded.right;

  const budget = Math.max(1, Math.min(deps.budgetMs, (apiServerTimeoutMs ?? Infinity) - answerMarginMs));
  // Not AbortSignal.timeout: the deadline must keep the process alive while an admission waits on it.
  const deadline = admissionDeadline(budget);
  // Every call this admission makes, through either port, counts under its namespace.
  if (request?.namespace) markAdmissionNamespace(deadline.signal, request.namespace);
  const { result: answer, counters } = await withRequestCounters(deadline.signal, async (): Promise<Answer> =>
    isLeft(decoded)
      ? { response: responseFor(uid, denied(400, `the admission request is malformed: ${describeDecodeErrors(decoded.left)}`)) }
      : respond(decoded.right, policy, { ...deps, signal: deadline.signal }, deadline, budget),
  ).finally(() => deadline.finish());
  const { response, failure } = answer;
  const code = response.status?.code ?? 200;
  return {
    kind: "reviewed",
    review: { apiVersion, kind: "AdmissionReview", response },
    record: {
      ...counters,
      operation: request?.operation ?? "",
      uid,
      namespace: request?.namespace ?? "",
      pod: request?.name ?? "",
      decision: response.allowed ? (response.patch ? "patched" : "allowed") : code >= 500 ? "error" : "denied",
      code,
      reason: response.status?.reason ?? "",
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
}

async function respond(request: AdmissionRequest, policy: ReviewPolicy, deps: PolicyDependencies, deadline: Deadline, budgetMs: number): Promise<Answer> {
  try {
    if (typeof policy !== "function") return { response: responseFor(request.uid, await Promise.race([policy.judgeRequest(request, deps), deadline.expired()])) };
    const admission = admissionOf(request);
    if ("problem" in admission) return { response: responseFor(request.uid, denied(400, admission.problem)) };
    if (!admission.admission) return { response: { uid: request.uid, allowed: true } };
    // Whatever a port does with the signal, the answer leaves when the budget is spent.
    return { response: responseFor(request.uid, await Promise.race([policy(admission.admission, deps), deadline.expired()])) };
  } catch (error) {
    const correlationId = randomUUID();
    const failure = { correlationId, detail: describeFailure(error) };
    if (error instanceof ClusterUnavailableError) {
      const code = error.failure === "timeout" ? 504 : 503;
      return { response: failedClosed(request.uid, code, plainFailure(whatHappened(error), correlationId)), failure };
    }
    if (deps.signal.aborted) {
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

/** A pod or binding admission, nothing to check (DELETE, CONNECT), or why the request is not one. */
function admissionOf(request: AdmissionRequest): { admission?: Admission } | { problem: string } {
  const { kind } = request;
  if (kind.group === "" && kind.kind === "Binding") return bindingAdmission(request);
  if (kind.group !== "" || kind.kind !== "Pod") return { problem: `expected a Pod or a Binding, got ${kind.kind || "no kind"}${kind.group ? ` (${kind.group})` : ""}` };
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

/**
 * pods/binding (and the older bindings resource) CREATE: the binding's annotations are copied
 * onto the pod, so the policy sees them. Nothing else is done to a Binding.
 */
function bindingAdmission(request: AdmissionRequest): { admission: BindingAdmission } | { problem: string } {
  if (request.operation !== "CREATE") return { problem: `unexpected operation "${request.operation}" on a Binding` };
  if (request.object === undefined || request.object === null) return { problem: "the request has no object" };
  const decoded = Binding.decode(request.object);
  if (isLeft(decoded)) return { problem: `the request object is not a Binding: ${describeDecodeErrors(decoded.left)}` };
  return {
    admission: {
      operation: "CREATE",
      namespace: request.namespace || decoded.right.metadata?.namespace || "default",
      name: request.name || decoded.right.metadata?.name || undefined,
      binding: decoded.right,
      userInfo: request.userInfo,
    },
  };
}

function decodePod(value: unknown, field: string): { pod: Pod } | { problem: string } {
  if (value === undefined || value === null) return { problem: `the request has no ${field}` };
  const decoded = decodePodObject(value);
  if (isLeft(decoded)) return { problem: `the request ${field} is not a Pod: ${describeDecodeErrors(decoded.left)}` };
  return { pod: decoded.right };
}
