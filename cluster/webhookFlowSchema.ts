import type { WebhookSubject } from "./webhookRbac.js";

/**
 * The API server's priority and fairness for the webhook's own calls. A pod create holds a seat
 * of its priority level while it waits on the webhook; if the webhook's access reviews and
 * credential spec reads queue in that same level, a burst of pod creates holds every seat and
 * the calls that would let them finish wait behind them until the admission budget runs out,
 * for every team at once. Ordinary users' pod creates and an Entra-identified webhook both land
 * in `global-default`, so the webhook's calls get a level of their own, matched before the
 * built-in schemas, that lends none of its seats away.
 */
export const webhookFlowControlName = "gmsa-admission-webhook";

const labels = { "app.kubernetes.io/name": "gmsa-admission" };

export function webhookPriorityLevel() {
  return {
    apiVersion: "flowcontrol.apiserver.k8s.io/v1",
    kind: "PriorityLevelConfiguration",
    metadata: { name: webhookFlowControlName, labels },
    spec: {
      type: "Limited",
      limited: {
        // About 23 seats of a default API server (600 seats over 255 shares): more than one
        // instance's API call cap, few enough not to crowd out the cluster's own levels.
        nominalConcurrencyShares: 10,
        lendablePercent: 0,
        limitResponse: { type: "Queue", queuing: { queues: 1, handSize: 1, queueLengthLimit: 128 } },
      },
    },
  };
}

export function webhookFlowSchema(subject: WebhookSubject) {
  return {
    apiVersion: "flowcontrol.apiserver.k8s.io/v1",
    kind: "FlowSchema",
    metadata: { name: webhookFlowControlName, labels },
    spec: {
      priorityLevelConfiguration: { name: webhookFlowControlName },
      // Ahead of the built-in service-accounts (9000) and global-default (9900) schemas.
      matchingPrecedence: 500,
      distinguisherMethod: { type: "ByUser" },
      rules: [
        {
          subjects: [
            subject.kind === "User"
              ? { kind: "User", user: { name: subject.name } }
              : { kind: "ServiceAccount", serviceAccount: { namespace: subject.namespace, name: subject.name } },
          ],
          resourceRules: [
            { verbs: ["create"], apiGroups: ["authorization.k8s.io"], resources: ["localsubjectaccessreviews"], namespaces: ["*"] },
            { verbs: ["create"], apiGroups: ["authorization.k8s.io"], resources: ["subjectaccessreviews"], clusterScope: true },
            { verbs: ["get", "list", "watch"], apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], clusterScope: true },
          ],
        },
      ],
    },
  };
}
