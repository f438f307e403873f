import { auditClusterRoleName } from "./auditRbac.js";
import type { KubeConfig } from "@kubernetes/client-node";
import { canaryDryRunPolicyName, canaryNamespace, canaryRoleName, canaryServiceAccount } from "./canary.js";
import { safetyNetPolicyNames } from "../lib/wiring/safetyNet.js";
import { objectRef } from "./changePlan.js";
import { withKubeObjects } from "./kubeObjects.js";
import type { KubernetesObject } from "./manifests.js";
import { namespaceOwnership } from "./namespaceOwnership.js";
import { relayName, relayPriorityClassName } from "./relay.js";
import { webhookConfigurationName } from "./webhookConfigurations.js";
import { webhookFlowControlName } from "./webhookFlowSchema.js";
import { webhookClusterRoleName } from "./webhookRbac.js";

type ObjectHeader = Pick<KubernetesObject, "apiVersion" | "kind" | "metadata">;

/**
 * What `--uninstall` removes, in order: the webhook configurations first (a configuration whose
 * webhook is gone would refuse every GMSA pod), then the relay, then the API priority level of the
 * webhook's calls, the canary's namespace and grant, and the RBAC. Never the CRD or a credential spec: workloads and the AKS add-on
 * may still need them. The namespace only when the wiring created it (namespaceOwnership.ts).
 */
export function uninstallOrder(namespace: string): ObjectHeader[] {
  const inRelay = (apiVersion: string, kind: string, name = relayName): ObjectHeader => ({ apiVersion, kind, metadata: { name, namespace } });
  return [
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name: webhookConfigurationName } },
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name: webhookConfigurationName } },
    inRelay("policy/v1", "PodDisruptionBudget"),
    inRelay("apps/v1", "Deployment"),
    inRelay("networking.k8s.io/v1", "NetworkPolicy"),
    inRelay("v1", "Service"),
    inRelay("v1", "Secret", `${relayName}-function-key`),
    inRelay("v1", "Secret", `${relayName}-tls`),
    inRelay("v1", "ConfigMap"),
    inRelay("v1", "ServiceAccount"),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: canaryRoleName, namespace: canaryNamespace } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: canaryRoleName, namespace: canaryNamespace } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: canaryServiceAccount, namespace: canaryNamespace } },
    { apiVersion: "v1", kind: "Namespace", metadata: { name: canaryNamespace } },
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicyBinding", metadata: { name: canaryDryRunPolicyName } },
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicy", metadata: { name: canaryDryRunPolicyName } },
    ...safetyNetPolicyNames.flatMap((name) => [
      { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicyBinding", metadata: { name } },
      { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicy", metadata: { name } },
    ]),
    { apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", metadata: { name: relayPriorityClassName } },
    { apiVersion: "flowcontrol.apiserver.k8s.io/v1", kind: "FlowSchema", metadata: { name: webhookFlowControlName } },
    { apiVersion: "flowcontrol.apiserver.k8s.io/v1", kind: "PriorityLevelConfiguration", metadata: { name: webhookFlowControlName } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: auditClusterRoleName } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: auditClusterRoleName } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: webhookClusterRoleName } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: webhookClusterRoleName } },
  ];
}

export interface Removal {
  readonly object: string;
  readonly outcome: "deleted" | "absent" | "kept" | "would delete";
}

export async function uninstall(config: KubeConfig, namespace: string, options: { dryRun?: boolean } = {}): Promise<Removal[]> {
  return withKubeObjects(config, async (client) => {
    const removals: Removal[] = [];
    for (const object of uninstallOrder(namespace)) {
      const ref = objectRef(object);
      const live = await client.read(object);
      if (live === undefined) {
        removals.push({ object: ref, outcome: "absent" });
        continue;
      }
      // Deleted only when the wiring created it: labels prove nothing, the apply itself writes them.
      if (object.kind === "Namespace" && namespaceOwnership(live) !== "ours") {
        removals.push({ object: ref, outcome: "kept" });
        continue;
      }
      if (options.dryRun) {
        removals.push({ object: ref, outcome: "would delete" });
        continue;
      }
      removals.push({ object: ref, outcome: await client.remove(object) });
    }
    return removals;
  });
}
