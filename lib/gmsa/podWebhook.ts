import { isLeft } from "fp-ts/Either";
import { describeDecodeErrors } from "../decodeErrors.js";
import type { Decoded, WebhookPolicy } from "../webhook/policy.js";
import type { AdmissionRequest } from "../webhook/request.js";
import type { Verdict } from "../webhook/verdict.js";
import { Binding } from "./binding.js";
import { decodePodObject, type Pod } from "./pod.js";
import type { Admission, BindingAdmission, PolicyDependencies, PolicySettings } from "./podAdmission.js";
import type { CredSpecSource, UseAuthorizer } from "./ports.js";

/** What the pod webhooks judge over: the two ports and the policy's settings. */
export interface PodPorts {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly settings: PolicySettings;
}

/** A pod policy: mutate (expandCredSpecs) or validate (validatePod). */
export type PodJudge = (admission: Admission, deps: PolicyDependencies) => Promise<Verdict>;

/**
 * A pod webhook in the shape every webhook has: the request's Pod (or pods/binding) decoded, then
 * judged by `judge` over the ports.
 */
export function podWebhook(judge: PodJudge): WebhookPolicy<PodPorts> {
  return (request): Decoded<PodPorts> => {
    const decoded = admissionOf(request);
    if ("problem" in decoded) return { kind: "refuse", problem: decoded.problem };
    const admission = decoded.admission;
    if (!admission) return { kind: "pass" };
    return {
      kind: "judge",
      judge: (ports, scope) => {
        // Every call this admission makes, through either port, counts under its namespace: the
        // one its access reviews ask about, so that the bound and the question never differ.
        const call = { signal: scope.signal, namespace: admission.namespace };
        return judge(admission, { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, call });
      },
    };
  };
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
