import { podWebhook } from "../../lib/gmsa/podWebhook.js";
import { exchangeAdmission, maxBodyBytes, type HttpCall } from "../../lib/admission/httpExchange.js";
import { expandCredSpecs } from "../../lib/gmsa/expandCredSpecs.js";
import { type CredSpecLookup, type CredSpecSource, type UseAuthorizer } from "../../lib/gmsa/ports.js";
import { ClusterUnavailableError } from "../../lib/webhook/clusterUnavailable.js";
import { validatePod } from "../../lib/gmsa/validatePod.js";
import { gmsaPlaces, mutateViolations, validateViolations, type OracleWorld } from "../support/admissionOracle.js";
import type { AdmissionCase, SpecAnswer, UseAnswer, World } from "./admissionCases.js";

/**
 * The properties every admission keeps, whatever the pod and whatever the cluster answers:
 * the HTTP exchange never throws; it answers an AdmissionReview with the request's UID within
 * the budget (plus a margin for a busy machine); an allowed validation never carries contents
 * that were not checked against a spec its principals may use; a mutation never inlines
 * contents for a principal without `use`; a binding carrying GMSA annotations is never allowed.
 */
export const caseBudgetMs = 40;
// The margin a busy machine needs for the work around the budget (reading and writing the
// body, the event loop); anything that waits on the cluster past the budget exceeds it.
const slackMs = Number(process.env.PROPERTY_SLACK_MS ?? 250);

/** What a case came to, for the bounded run to show it reached the checks that matter. */
export interface CaseOutcome {
  readonly webhook: AdmissionCase["webhook"];
  readonly kind: string;
  readonly operation: string;
  /** 200 when allowed, the status code otherwise; 413 for an oversized body. */
  readonly code: number;
  readonly message: string;
  /** GMSA places of the pod, as the independent reading finds them. */
  readonly places: number;
  /** Contents a mutation added. */
  readonly inlined: number;
}

/** Gives up on an answer that does not come: a webhook that never answers breaks the budget too. */
function answeredWithin<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms, budget ${caseBudgetMs} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

function hang(signal: AbortSignal, deaf: boolean): Promise<never> {
  return new Promise((_, reject) => {
    if (!deaf) signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

function portsOf(world: World): { credSpecs: CredSpecSource; authorizer: UseAuthorizer } {
  const answer = (answer: SpecAnswer | undefined, name: string, signal: AbortSignal): Promise<CredSpecLookup> => {
    switch (answer ?? "notFound") {
      case "found":
        return Promise.resolve({ kind: "found", credspec: world.credspecs[name]! });
      case "notFound":
        return Promise.resolve({ kind: "notFound" });
      case "noCredspec":
        return Promise.resolve({ kind: "noCredspec" });
      case "serverError":
        return Promise.reject(new ClusterUnavailableError("the Kubernetes API server answered 500", "serverError", 500));
      case "hang":
        return hang(signal, false);
      case "deafHang":
        return hang(signal, true);
    }
  };
  const decide = (answer: UseAnswer | undefined, signal: AbortSignal) => {
    switch (answer ?? "allow") {
      case "allow":
        return Promise.resolve({ allowed: true as const });
      case "deny":
        return Promise.resolve({ allowed: false as const });
      case "serverError":
        return Promise.reject(new ClusterUnavailableError("the Kubernetes API server answered 503", "serverError", 503));
      case "hang":
        return hang(signal, false);
    }
  };
  return {
    credSpecs: { lookup: (name, call) => answer(world.specs[name], name, call.signal) },
    authorizer: {
      mayUse: (principal, _namespace, name, call) => decide(principal.serviceAccount ? world.serviceAccountUse[name] : world.userUse[name], call.signal),
    },
  };
}

function oracleWorld(c: AdmissionCase, userInfo: unknown): OracleWorld {
  const username = typeof userInfo === "object" && userInfo !== null ? (userInfo as { username?: unknown }).username : undefined;
  const userMay = (name: string) => !c.settings.authorizeRequestingUser || (typeof username === "string" && username !== "" && (c.world.userUse[name] ?? "allow") === "allow");
  return {
    mayUse: (name) => (c.world.serviceAccountUse[name] ?? "allow") === "allow" && userMay(name),
    lookup: (name) => {
      const answer = c.world.specs[name];
      if (answer === "found") return { kind: "found", credspec: c.world.credspecs[name]! };
      if (answer === "noCredspec") return { kind: "noCredspec" };
      return { kind: "notFound" };
    },
  };
}

const gmsaKey = /^(pod|.+\.container)\.alpha\.windows\.kubernetes\.io\/gmsa-credential-spec(-name)?$/;

/** Runs one case through the HTTP exchange; throws an Error saying which property broke. */
export async function checkAdmissionCase(c: AdmissionCase): Promise<CaseOutcome> {
  const text = JSON.stringify(c.review);
  const call: HttpCall = {
    method: "POST",
    contentType: "application/json",
    contentLength: String(Buffer.byteLength(text)),
    timeout: "10s",
    readBody: async () => Buffer.from(text),
  };
  const ports = portsOf(c.world);
  const started = performance.now();
  const { reply } = await answeredWithin(
    caseBudgetMs + slackMs,
    exchangeAdmission(call, podWebhook(c.webhook === "mutate" ? expandCredSpecs : validatePod), { ...ports, settings: c.settings, budgetMs: caseBudgetMs }),
  );
  const elapsed = performance.now() - started;
  if (Buffer.byteLength(text) > maxBodyBytes) {
    if (reply.status !== 413) throw new Error(`a body of ${Buffer.byteLength(text)} bytes was answered ${reply.status}`);
    return { webhook: c.webhook, kind: "", operation: "", code: 413, message: "", places: 0, inlined: 0 };
  }
  if (reply.status !== 200) throw new Error(`HTTP ${reply.status}: ${reply.body.slice(0, 300)}`);
  const review = JSON.parse(reply.body);
  const request = c.review.request as { uid: string; kind: { kind: string }; operation: string; object: unknown; oldObject?: unknown; userInfo: unknown };
  if (review.kind !== "AdmissionReview" || review.response?.uid !== request.uid) throw new Error(`not an AdmissionReview with the UID: ${reply.body.slice(0, 300)}`);
  if (elapsed > caseBudgetMs + slackMs) throw new Error(`answered after ${elapsed.toFixed(0)} ms, budget ${caseBudgetMs} ms`);
  const response = review.response as { allowed: boolean; patch?: string; status?: { code: number; message: string } };
  if (response.status?.code === 500) throw new Error(`an unexpected failure: ${response.status.message}`);
  const outcome = (inlined: number): CaseOutcome => ({
    webhook: c.webhook,
    kind: request.kind.kind,
    operation: request.operation,
    code: response.allowed ? 200 : (response.status?.code ?? 0),
    message: response.status?.message ?? "",
    places: request.kind.kind === "Pod" ? gmsaPlaces(request.object).length : 0,
    inlined,
  });
  if (!response.allowed) return outcome(0);

  const patch: Array<{ op: string; path: string; value: unknown }> = response.patch ? JSON.parse(Buffer.from(response.patch, "base64").toString()) : [];
  let violations: string[];
  if (request.kind.kind === "Binding") {
    const annotations = (request.object as { metadata?: { annotations?: unknown } }).metadata?.annotations;
    const keys = typeof annotations === "object" && annotations !== null ? Object.keys(annotations).filter((k) => gmsaKey.test(k)) : [];
    violations = [...(patch.length > 0 ? ["a binding was patched"] : []), ...(c.webhook === "validate" && keys.length > 0 ? [`a binding setting ${keys[0]} was allowed`] : [])];
  } else if (c.webhook === "validate") {
    violations = validateViolations(request.operation, request.object, request.oldObject, oracleWorld(c, request.userInfo));
  } else {
    violations = mutateViolations(request.object, patch, oracleWorld(c, request.userInfo));
  }
  if (violations.length > 0) throw new Error(`${c.webhook} allowed it: ${violations.join("; ")}`);
  return outcome(patch.filter((op) => op.path !== "/spec/hostname").length);
}
