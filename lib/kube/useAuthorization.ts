import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { type Principal, type UseAuthorizer } from "../gmsa/ports.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";
import { callApi, type ApiCallOptions } from "./apiCall.js";
import type { ApiServerConnection } from "./apiServerConnection.js";
import { credSpecResource } from "./credSpecApi.js";

/**
 * Asks the API server whether a principal may `use` a credential spec: a
 * LocalSubjectAccessReview in the pod's namespace for a service account, a SubjectAccessReview
 * for the requesting user.
 */
/** What admission reads of an access review's answer. */
const ReviewAnswer = t.partial({
  status: t.partial({ allowed: t.boolean, denied: t.boolean, reason: t.string, evaluationError: t.string }),
});

export function useAuthorization(connection: ApiServerConnection, bounds: ApiCallOptions): UseAuthorizer {
  return {
    async mayUse(principal, namespace, credSpecName, call) {
      const resourceAttributes = {
        namespace,
        verb: "use",
        group: credSpecResource.group,
        resource: credSpecResource.plural,
        name: credSpecName,
      };
      const spec = {
        user: principal.user,
        groups: [...principal.groups],
        ...(principal.uid ? { uid: principal.uid } : {}),
        ...(principal.extra ? { extra: copyExtra(principal.extra) } : {}),
        resourceAttributes,
      };
      const local = principal.serviceAccount !== undefined;
      const kind = local ? "LocalSubjectAccessReview" : "SubjectAccessReview";
      const path = local
        ? `/apis/authorization.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/localsubjectaccessreviews`
        : "/apis/authorization.k8s.io/v1/subjectaccessreviews";
      const body = { apiVersion: "authorization.k8s.io/v1", kind, spec };
      const outcome = await callApi(`a ${kind} for ${describe(principal)}`, call, bounds, (callSignal) =>
        connection.send({ method: "POST", path, body, signal: callSignal, timeoutMs: bounds.timeoutMs }),
      );
      if (!outcome.ok) {
        throw new ClusterUnavailableError(
          `the Kubernetes API server refused the access review for ${describe(principal)} (HTTP ${outcome.status}); check the webhook's own RBAC`,
          "rejected",
          outcome.status,
        );
      }
      const answer = ReviewAnswer.decode(outcome.value);
      if (isLeft(answer)) {
        throw new ClusterUnavailableError(
          `the Kubernetes API server answered the access review for ${describe(principal)} with something that is not an access review`,
          "rejected",
        );
      }
      const status = answer.right.status;
      if (status?.allowed === true && status.denied !== true) return { allowed: true };
      return { allowed: false, reason: status?.reason || status?.evaluationError || undefined };
    },
  };
}

function describe(principal: Principal): string {
  return `"${principal.user}"`;
}

function copyExtra(extra: Readonly<Record<string, readonly string[]>>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(extra).map(([key, values]) => [key, [...values]]));
}
