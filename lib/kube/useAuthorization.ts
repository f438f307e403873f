import type { AuthorizationV1Api, V1ResourceAttributes } from "@kubernetes/client-node";
import { ClusterUnavailableError, type Principal, type UseAuthorizer } from "../gmsa/ports.js";
import { callApi, type ApiCallOptions } from "./apiCall.js";
import { credSpecResource } from "./credSpecApi.js";

/**
 * Asks the API server whether a principal may `use` a credential spec: a
 * LocalSubjectAccessReview in the pod's namespace for a service account, a SubjectAccessReview
 * for the requesting user.
 */
export function useAuthorization(api: AuthorizationV1Api, bounds: ApiCallOptions): UseAuthorizer {
  return {
    async mayUse(principal, namespace, credSpecName, signal) {
      const resourceAttributes: V1ResourceAttributes = {
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
      const outcome = await callApi(`${local ? "a LocalSubjectAccessReview" : "a SubjectAccessReview"} for ${describe(principal)}`, signal, bounds, (options) =>
        local
          ? api.createNamespacedLocalSubjectAccessReview({ namespace, body: { apiVersion: "authorization.k8s.io/v1", kind: "LocalSubjectAccessReview", spec } }, options)
          : api.createSubjectAccessReview({ body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec } }, options),
      );
      if (!outcome.ok) {
        throw new ClusterUnavailableError(
          `the Kubernetes API server refused the access review for ${describe(principal)} (HTTP ${outcome.status}); check the webhook's own RBAC`,
          "rejected",
          outcome.status,
        );
      }
      const status = outcome.value.status;
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
