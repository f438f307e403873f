import type { WebhookSubject } from "./webhookRbac.js";

/**
 * What the function's canary needs in each cluster (lib/canary): a namespace of its own, a service
 * account there that may use no credential spec, and the smallest grant that lets the function's
 * identity ask for a server-side dry run of a pod there (`create` on pods in that namespace only:
 * RBAC cannot tell a dry run from a real create, so the namespace is what bounds it). The canary
 * asks for such a dry run every few minutes, and the API server calls the webhooks through the
 * wiring exactly as it does for a real pod. The namespace enforces Pod Security's baseline, and a
 * ValidatingAdmissionPolicy refuses every pod create there that is not a dry run, so a stolen token
 * of the identity starts no pod with the grant. `--uninstall` removes the grant, the policy and the
 * service account and leaves the namespace, which may hold more than the wiring put there.
 */
export const canaryNamespace = "gmsa-admission-canary";
export const canaryServiceAccount = "canary";
export const canaryRoleName = "gmsa-admission-canary";

const labels = { "app.kubernetes.io/name": "gmsa-admission", "app.kubernetes.io/component": "canary" };

export const canaryDryRunPolicyName = "gmsa-admission-canary-dry-run-only";

export function canaryObjects(subject: WebhookSubject) {
  return [
    // Whatever asks, nothing privileged runs here: Pod Security's baseline, which the canary's pod meets.
    { apiVersion: "v1", kind: "Namespace", metadata: { name: canaryNamespace, labels: { ...labels, "pod-security.kubernetes.io/enforce": "baseline" } } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: canaryServiceAccount, namespace: canaryNamespace, labels }, automountServiceAccountToken: false },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: canaryRoleName, namespace: canaryNamespace, labels },
      rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["create"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: canaryRoleName, namespace: canaryNamespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: canaryRoleName },
      subjects: [
        subject.kind === "User"
          ? { apiGroup: "rbac.authorization.k8s.io", kind: "User", name: subject.name }
          : { kind: "ServiceAccount", name: subject.name, namespace: subject.namespace },
      ],
    },
    // RBAC cannot say "dry runs only"; the API server's own admission can: no pod is ever created
    // in the canary's namespace, by anyone, so the grant above starts nothing.
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: canaryDryRunPolicyName, labels },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": canaryNamespace } },
          resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
        },
        validations: [{ expression: "request.dryRun == true", message: `only dry runs of pods are allowed in ${canaryNamespace} (the gmsa-admission canary)` }],
      },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: canaryDryRunPolicyName, labels },
      spec: { policyName: canaryDryRunPolicyName, validationActions: ["Deny"] },
    },
  ];
}
