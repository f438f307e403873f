import { useGrantAdvice } from "../lib/gmsa/useGrant.js";
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
 * Dry runs are left to the webhooks: they store nothing.
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

/** The API server's own authorizer, asked as the function asks: a LocalSubjectAccessReview in the pod's namespace. */
const useCheck = (principal: string, name: string) =>
  `${principal}.group('windows.k8s.io').resource('gmsacredentialspecs').namespace(request.namespace).name(${name}).check('use').allowed()`;
const serviceAccountAuthorizer = "authorizer.serviceAccount(request.namespace, variables.serviceAccount)";

/**
 * The API server charges 350 000 per authorizer check against a limit of 1 000 000 per expression
 * and 10 000 000 per policy evaluation (k8s.io/apiserver pkg/cel/library/cost.go and
 * pkg/apis/cel/config.go): so each check has a rule of its own, one per position in the list of
 * names, and a name is asked about at its first place only. This many distinct names are checked
 * for the service account (half as many when the requesting user is asked too); a pod that names
 * more is refused, as the function refuses more than GMSA_MAX_CREDSPECS_PER_POD (16 by default).
 */
export const checkedNamesPerPrincipal = 24;

function useRules(principal: { readonly authorizer: string; readonly who: string; readonly grant: (name: string) => string }, positions: number) {
  return Array.from({ length: positions }, (_, i) => ({
    expression: `request.operation != 'CREATE' || size(variables.names) <= ${i} || variables.names.indexOf(variables.names[${i}]) != ${i} || ${useCheck(principal.authorizer, `variables.names[${i}]`)}`,
    messageExpression: `'${who}: ' + ${principal.who} + ' is not authorized to use GMSACredentialSpec "' + variables.names[${i}] + '"' + ${principal.grant(`variables.names[${i}]`)}`,
    message: `${who}: the pod's service account or its requesting user is not authorized to use a GMSACredentialSpec the pod names`,
    reason: "Forbidden",
  }));
}

/** A CEL string literal. */
const celString = (text: string) => `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/**
 * The function's advice after a 403 (lib/gmsa/useGrant.ts), as a CEL expression: made by the same
 * code with markers for the spec, the namespace and the service account, which become CEL.
 */
function grantAdviceExpression(name: string): string {
  const marks = { spec: "\u0001spec\u0001", namespace: "\u0001namespace\u0001", account: "\u0001account\u0001" };
  const text = useGrantAdvice(marks.spec, marks.namespace, { kind: "ServiceAccount", namespace: marks.namespace, name: marks.account });
  const cel: Record<string, string> = { [marks.spec]: name, [marks.namespace]: "request.namespace", [marks.account]: "variables.serviceAccount" };
  return text
    .split(/(\u0001\w+\u0001)/)
    .filter((part) => part !== "")
    .map((part) => cel[part] ?? celString(part))
    .join(" + ");
}

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
  const positions = options.authorizeRequestingUser ? checkedNamesPerPrincipal / 2 : checkedNamesPerPrincipal;
  const validations = [
    {
      expression: `request.operation != 'CREATE' || variables.names.all(n, size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))`,
      messageExpression: `'${who}: "' + variables.names.filter(n, !(size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))[0] + '" is not a valid GMSACredentialSpec name'`,
      message: `${who}: a GMSA credential spec name is not a valid GMSACredentialSpec name`,
      reason: "Invalid",
    },
    {
      expression: `request.operation != 'CREATE' || variables.names.all(n, variables.names.indexOf(n) < ${positions})`,
      messageExpression: `'${who}: the pod names more than ${positions} distinct GMSA credential specs; the in-cluster policy checks at most ${positions}'`,
      reason: "Invalid",
    },
    ...useRules(
      {
        authorizer: serviceAccountAuthorizer,
        who: `'service account "' + variables.serviceAccount + '" in namespace "' + request.namespace + '"'`,
        grant: (name) => `'; if the name is right, ' + ${grantAdviceExpression(name)}`,
      },
      positions,
    ),
    ...(options.authorizeRequestingUser ? useRules({ authorizer: "authorizer", who: `'user "' + request.userInfo.username + '"'`, grant: () => "''" }, positions) : []),
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
        // Dry runs store nothing, and pass to the webhooks: the deploy's readiness check and
        // `kubectl --dry-run=server` see the function's own answer.
        matchConditions: [
          { name: "not-a-dry-run", expression: "request.dryRun != true" },
          { name: "gmsa-settings", expression: `(${podHasGmsaSettings("object")}) || (${podHasGmsaSettings("oldObject")})` },
        ],
        variables: [
          { name: "names", expression: namesOf("object") },
          {
            name: "serviceAccount",
            expression:
              "has(object.spec.serviceAccountName) && object.spec.serviceAccountName != '' ? object.spec.serviceAccountName : (has(object.spec.serviceAccount) && object.spec.serviceAccount != '' ? object.spec.serviceAccount : 'default')",
          },
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
          resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods/binding", "bindings"] }],
        },
        matchConditions: [{ name: "not-a-dry-run", expression: "request.dryRun != true" }],
        variables: [{ name: "keys", expression: `has(object.metadata.annotations) ? object.metadata.annotations.filter(k, ${isGmsaAnnotation("k")}) : []` }],
        validations: [
          {
            expression: `!has(object.metadata.annotations) || !object.metadata.annotations.exists(k, ${isGmsaAnnotation("k")})`,
            messageExpression: `'${who}: binding of pod "' + object.metadata.name + '": GMSA settings cannot be changed on an existing pod (the binding would set ' + (size(variables.keys) == 1 ? 'the annotation ' + variables.keys[0] : 'the annotations ' + variables.keys.join(', ')) + ')'`,
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
