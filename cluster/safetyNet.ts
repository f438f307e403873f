import { canaryNamespace } from "./canary.js";
import { podHasGmsaSettings } from "./matchConditions.js";
import { excludedNamespaceLabel } from "./webhookConfigurations.js";

/**
 * The in-cluster safety net: ValidatingAdmissionPolicies that the API server evaluates itself,
 * beside the webhooks, so that the `use` rule holds even where the webhooks do not run (their
 * configurations deleted, switched to `failurePolicy: Ignore`, or the function misbehaving).
 *
 * CEL cannot read the credential spec a pod names (no lookups, no JSON parser), so what needs the
 * spec stays the function's: that it exists, and that inlined contents equal it. What the policy
 * holds, in the function's words:
 * - pods, CREATE: every credential spec name in every place the function reads (pod level, every
 *   container kind, the alpha annotations) is a valid name, and the pod's service account (and the
 *   requesting user, when that check is on) may `use` it, asked of the API server's own
 *   authorizer exactly as the function's LocalSubjectAccessReview asks; contents without a name
 *   are refused;
 * - pods, UPDATE (including `pods/ephemeralcontainers`): GMSA names and contents do not change;
 * - bindings: none carries a GMSA annotation key.
 * The policies match the namespaces the webhooks match (not kube-system, not those labelled
 * windows.k8s.io/disabled=true) and, through matchConditions, only pods with GMSA settings: every
 * other pod never evaluates a rule. The canary's namespace is left out: no pod can be created
 * there at all (its own policy admits dry runs only), and the canary needs the function's answer.
 */
export const safetyNetPodPolicyName = "gmsa-admission-pods";
export const safetyNetBindingPolicyName = "gmsa-admission-bindings";

const labels = { "app.kubernetes.io/name": "gmsa-admission", "app.kubernetes.io/component": "safety-net" };
const who = "the in-cluster policy of gmsa-admission";

const windowsOptions = (holder: string) => `${holder}.securityContext.windowsOptions`;
const hasWindowsOptions = (holder: string) => `has(${holder}.securityContext) && has(${windowsOptions(holder)})`;
const containerLists = ["containers", "initContainers", "ephemeralContainers"] as const;

const nameSuffix = "gmsa-credential-spec-name";
const contentsSuffix = "gmsa-credential-spec";
const podAnnotationPrefix = "pod.alpha.windows.kubernetes.io/";
const containerAnnotationSuffix = ".container.alpha.windows.kubernetes.io/";

/** A GMSA alpha annotation key as the function reads them: the pod's, or `<container>.container…`. */
function isAnnotation(key: string, suffix: string): string {
  const containerKey = containerAnnotationSuffix + suffix;
  return `(${key} == '${podAnnotationPrefix}${suffix}' || (${key}.endsWith('${containerKey}') && size(${key}) > ${containerKey.length}))`;
}

const isGmsaAnnotation = (key: string) => `(${isAnnotation(key, nameSuffix)} || ${isAnnotation(key, contentsSuffix)})`;

/** Every credential spec name `pod` (object or oldObject) carries, in the order the function reads them. */
function namesOf(pod: string): string {
  const spec = `${pod}.spec`;
  const podLevel = `(${hasWindowsOptions(spec)} && has(${windowsOptions(spec)}.gmsaCredentialSpecName) ? [${windowsOptions(spec)}.gmsaCredentialSpecName] : [])`;
  const lists = containerLists.map(
    (field) =>
      `(has(${spec}.${field}) ? ${spec}.${field}.filter(c, ${hasWindowsOptions("c")} && has(${windowsOptions("c")}.gmsaCredentialSpecName)).map(c, ${windowsOptions("c")}.gmsaCredentialSpecName) : [])`,
  );
  const annotations = `${pod}.metadata.annotations`;
  const annotated = `(has(${annotations}) ? ${annotations}.filter(k, ${isAnnotation("k", nameSuffix)}).map(k, ${annotations}[k]) : [])`;
  return [podLevel, ...lists, annotated].join(" + ");
}

/** Each place of `pod` with GMSA settings as `place=name|contents`, to compare an UPDATE's two objects. */
function settingsOf(pod: string): string {
  const spec = `${pod}.spec`;
  const value = (holder: string, field: string) => `(has(${windowsOptions(holder)}.${field}) ? ${windowsOptions(holder)}.${field} : '')`;
  const set = (holder: string) => `${hasWindowsOptions(holder)} && (has(${windowsOptions(holder)}.gmsaCredentialSpecName) || has(${windowsOptions(holder)}.gmsaCredentialSpec))`;
  const place = (holder: string, label: string) => `${label} + '=' + ${value(holder, "gmsaCredentialSpecName")} + '|' + ${value(holder, "gmsaCredentialSpec")}`;
  const podLevel = `(${set(spec)} ? [${place(spec, "'pod'")}] : [])`;
  const lists = containerLists.map((field) => `(has(${spec}.${field}) ? ${spec}.${field}.filter(c, ${set("c")}).map(c, ${place("c", `'${field}/' + c.name`)}) : [])`);
  const annotations = `${pod}.metadata.annotations`;
  const annotated = `(has(${annotations}) ? ${annotations}.filter(k, ${isGmsaAnnotation("k")}).map(k, k + '=' + ${annotations}[k]) : [])`;
  return [podLevel, ...lists, annotated].join(" + ");
}

/** True when some place of `object` carries contents without a name. */
function contentsWithoutName(): string {
  const spec = "object.spec";
  const orphan = (holder: string) => `${hasWindowsOptions(holder)} && has(${windowsOptions(holder)}.gmsaCredentialSpec) && !has(${windowsOptions(holder)}.gmsaCredentialSpecName)`;
  const lists = containerLists.map((field) => `(has(${spec}.${field}) && ${spec}.${field}.exists(c, ${orphan("c")}))`);
  const annotations = "object.metadata.annotations";
  const orphanAnnotation = `(has(${annotations}) && ${annotations}.exists(k, ${isAnnotation("k", contentsSuffix)} && !((k + '-name') in ${annotations})))`;
  return [`(${orphan(spec)})`, ...lists, orphanAnnotation].join(" || ");
}

const useCheck = (principal: string) =>
  `${principal}.group('windows.k8s.io').resource('gmsacredentialspecs').namespace(request.namespace).name(n).check('use').allowed()`;
const serviceAccountAuthorizer = "authorizer.serviceAccount(request.namespace, variables.serviceAccount)";

/**
 * The end of a `use` refusal. A message cannot ask the authorizer which name was refused, so with
 * one name it is named, as the function names it; with several, all are listed.
 */
const refusedNames = `(size(variables.names) == 1 ? 'is not authorized to use GMSACredentialSpec "' + variables.names[0] + '"' : 'is not authorized to use every GMSACredentialSpec the pod names (' + variables.names.map(n, '"' + n + '"').join(', ') + ')')`;

/** Only where the webhooks run: the same namespaces, less the canary's. */
const namespaceSelector = {
  matchExpressions: [
    { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system", canaryNamespace] },
    { key: excludedNamespaceLabel.key, operator: "NotIn", values: [excludedNamespaceLabel.value] },
  ],
};

export interface SafetyNetOptions {
  /** The function runs with GMSA_AUTHORIZE_REQUESTING_USER: the requesting user must hold `use` too. */
  readonly authorizeRequestingUser: boolean;
}

export function safetyNetObjects(options: SafetyNetOptions) {
  const validations = [
    {
      expression: `request.operation != 'CREATE' || variables.names.all(n, size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))`,
      messageExpression: `'${who}: "' + variables.names.filter(n, !(size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))[0] + '" is not a valid GMSACredentialSpec name'`,
      message: `${who}: a GMSA credential spec name is not a valid GMSACredentialSpec name`,
      reason: "Invalid",
    },
    {
      expression: `request.operation != 'CREATE' || size(variables.notUsableByServiceAccount) == 0`,
      messageExpression: `'${who}: service account "' + variables.serviceAccount + '" in namespace "' + request.namespace + '" ' + ${refusedNames}`,
      message: `${who}: the pod's service account is not authorized to use a GMSACredentialSpec the pod names`,
      reason: "Forbidden",
    },
    ...(options.authorizeRequestingUser
      ? [
          {
            expression: `request.operation != 'CREATE' || size(variables.notUsableByUser) == 0`,
            messageExpression: `'${who}: user "' + request.userInfo.username + '" ' + ${refusedNames}`,
            message: `${who}: the requesting user is not authorized to use a GMSACredentialSpec the pod names`,
            reason: "Forbidden",
          },
        ]
      : []),
    {
      expression: `request.operation != 'CREATE' || !(${contentsWithoutName()})`,
      message: `${who}: GMSA credential spec contents are set without a credential spec name; set the gmsaCredentialSpecName of the same windowsOptions instead`,
      reason: "Invalid",
    },
    {
      expression: `request.operation != 'UPDATE' || (variables.settings.all(s, s in variables.oldSettings) && variables.oldSettings.all(s, s in variables.settings))`,
      message: `${who}: GMSA settings cannot be changed on an existing pod`,
      reason: "Forbidden",
    },
  ];
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: safetyNetPodPolicyName, labels },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          namespaceSelector,
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"] },
            { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/ephemeralcontainers"] },
          ],
        },
        // Only pods with GMSA settings, now or before: every other pod never evaluates a rule.
        matchConditions: [{ name: "gmsa-settings", expression: `(${podHasGmsaSettings("object")}) || (${podHasGmsaSettings("oldObject")})` }],
        variables: [
          { name: "names", expression: namesOf("object") },
          {
            name: "serviceAccount",
            expression:
              "has(object.spec.serviceAccountName) && object.spec.serviceAccountName != '' ? object.spec.serviceAccountName : (has(object.spec.serviceAccount) && object.spec.serviceAccount != '' ? object.spec.serviceAccount : 'default')",
          },
          // The API server's own authorizer, asked as the function asks (a LocalSubjectAccessReview
          // in the pod's namespace); only when a CREATE's rule reads them.
          { name: "notUsableByServiceAccount", expression: `variables.names.filter(n, !${useCheck(serviceAccountAuthorizer)})` },
          ...(options.authorizeRequestingUser ? [{ name: "notUsableByUser", expression: `variables.names.filter(n, !${useCheck("authorizer")})` }] : []),
          { name: "settings", expression: settingsOf("object") },
          { name: "oldSettings", expression: `oldObject == null ? [] : ${settingsOf("oldObject")}` },
        ],
        validations,
      },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: safetyNetPodPolicyName, labels },
      spec: { policyName: safetyNetPodPolicyName, validationActions: ["Deny"] },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: safetyNetBindingPolicyName, labels },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          namespaceSelector,
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods/binding", "bindings"] },
          ],
        },
        validations: [
          {
            expression: `!has(object.metadata.annotations) || !object.metadata.annotations.exists(k, ${isGmsaAnnotation("k")})`,
            message: `${who}: GMSA settings cannot be changed on an existing pod (a binding may not carry GMSA annotations)`,
            reason: "Forbidden",
          },
        ],
      },
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: safetyNetBindingPolicyName, labels },
      spec: { policyName: safetyNetBindingPolicyName, validationActions: ["Deny"] },
    },
  ];
}
