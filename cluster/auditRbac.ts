import { credSpecCrdName } from "../lib/wiring/credSpecCrd.js";
import { safetyNetPolicyNames } from "../lib/wiring/safetyNetNames.js";
import { webhookConfigurationName } from "../lib/wiring/webhooks.js";
import type { WebhookSubject } from "./webhookRbac.js";

/**
 * What the credential spec audit (lib/credspec/audit.ts), run by the function's timer with
 * GMSA_AUDIT, reads beyond what the webhook may: pods in every namespace and the RBAC objects,
 * and the product's own wiring by name (its webhook configurations, the CRD, the safety net's
 * policies and bindings) and the NetworkPolicies that guard the relay, read-only. Opt-in (`npm run wire -- --audit`, the Bicep module's
 * `audit`): pods' specs hold their image names, commands and environment variables, which the
 * webhook itself never needs.
 */
export const auditClusterRoleName = "gmsa-admission-audit";

const labels = { "app.kubernetes.io/name": "gmsa-admission", "app.kubernetes.io/component": "audit" };

export function auditObjects(subject: WebhookSubject) {
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: auditClusterRoleName, labels },
      rules: [
        { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
        { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], verbs: ["list"] },
        {
          apiGroups: ["admissionregistration.k8s.io"],
          resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
          verbs: ["get"],
          resourceNames: [webhookConfigurationName],
        },
        {
          apiGroups: ["admissionregistration.k8s.io"],
          resources: ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
          verbs: ["get"],
          resourceNames: [...safetyNetPolicyNames],
        },
        { apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get"], resourceNames: [credSpecCrdName] },
        // In relay wiring, who may reach the relay (its namespace is the wiring's choice).
        { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["list"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: auditClusterRoleName, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: auditClusterRoleName },
      subjects: [
        subject.kind === "User"
          ? { apiGroup: "rbac.authorization.k8s.io", kind: "User", name: subject.name }
          : { kind: "ServiceAccount", name: subject.name, namespace: subject.namespace },
      ],
    },
  ];
}
