import { useGrantAdvice } from "../gmsa/useGrant.js";
import { podHasGmsaSettings } from "./matchConditions.js";
import { safetyNetBindingPolicyName, safetyNetPodPolicyName } from "./safetyNetNames.js";
import { safetyNetCredSpecObjects } from "./safetyNetCredSpecs.js";
import { celString, denyingPolicy, safetyNetWho } from "./safetyNetParts.js";
import { excludedNamespaceLabel } from "./webhooks.js";

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
 * - pods, UPDATE (of the pod, `pods/status` and `pods/ephemeralcontainers`): GMSA names and
 *   contents do not change; ephemeral containers an UPDATE adds are checked as a new pod is, and
 *   one naming no credential spec needs `use` of the pod-level one it runs under;
 * - bindings: none carries a GMSA annotation key;
 * - credential specs (lib/wiring/safetyNetCredSpecs.ts): the shape the credential spec webhook checks.
 * Dry runs are left to the webhooks: they store nothing.
 * The policies match the namespaces the webhooks match (not kube-system, not those labelled
 * windows.k8s.io/disabled=true) and, through matchConditions, only pods with GMSA settings: every
 * other pod never evaluates a rule.
 */
export { safetyNetBindingPolicyName, safetyNetPodPolicyName, safetyNetPolicyNames } from "./safetyNetNames.js";

const who = safetyNetWho;

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
  const lists = containerLists.map((field) => namesIn(`(has(${spec}.${field}) ? ${spec}.${field} : [])`));
  return [podFieldName(pod), ...lists, annotatedNames(pod, isAnnotation("k", nameSuffix))].join(" + ");
}

/** The names a list of containers gives in their own windowsOptions. */
const namesIn = (containers: string) =>
  `${containers}.filter(c, ${hasWindowsOptions("c")} && has(${windowsOptions("c")}.gmsaCredentialSpecName)).map(c, ${windowsOptions("c")}.gmsaCredentialSpecName)`;

const podFieldName = (pod: string) =>
  `(${hasWindowsOptions(`${pod}.spec`)} && has(${windowsOptions(`${pod}.spec`)}.gmsaCredentialSpecName) ? [${windowsOptions(`${pod}.spec`)}.gmsaCredentialSpecName] : [])`;

/** The values of the annotations of `pod` whose key `k` meets `which`. */
function annotatedNames(pod: string, which: string): string {
  const annotations = `${pod}.metadata.annotations`;
  return `(has(${annotations}) ? ${annotations}.filter(k, ${which}).map(k, ${annotations}[k]) : [])`;
}

/** The names at the pod's own level (its windowsOptions and the pod's alpha annotation): what a container naming none runs under. */
const podLevelNames = (pod: string) => `${podFieldName(pod)} + ${annotatedNames(pod, `k == '${podAnnotationPrefix}${nameSuffix}'`)}`;

/**
 * The ephemeral containers an UPDATE of `pods/ephemeralcontainers` adds: new workloads in the pod,
 * which the function checks as it checks a new pod. One that names no credential spec of its own
 * runs under the pod's, so its principals must hold `use` on that too.
 */
const oldEphemeralNames = "(oldObject != null && has(oldObject.spec.ephemeralContainers) ? oldObject.spec.ephemeralContainers.map(c, c.name) : [])";
const newEphemeral = `(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers.filter(c, !(c.name in variables.oldEphemeralNames)) : [])`;
const namesOwnCredSpec = (c: string) => `${hasWindowsOptions(c)} && has(${windowsOptions(c)}.gmsaCredentialSpecName)`;
const checkedNames = [
  "request.operation == 'CREATE' ? variables.names",
  `: has(request.subResource) && request.subResource == 'ephemeralcontainers' ? ${namesIn("variables.newEphemeral")} + (variables.newEphemeral.exists(c, !(${namesOwnCredSpec("c")})) ? ${podLevelNames("object")} : [])`,
  ": []",
].join(" ");

/**
 * Each place of `pod` with GMSA settings as `place=name|contents`, to compare an UPDATE's two
 * objects; of the new object, ephemeral containers the UPDATE adds are left out (they are checked
 * as new workloads, not compared).
 */
function settingsOf(pod: string): string {
  const spec = `${pod}.spec`;
  const value = (holder: string, field: string) => `(has(${windowsOptions(holder)}.${field}) ? ${windowsOptions(holder)}.${field} : '')`;
  const set = (holder: string) => `${hasWindowsOptions(holder)} && (has(${windowsOptions(holder)}.gmsaCredentialSpecName) || has(${windowsOptions(holder)}.gmsaCredentialSpec))`;
  const place = (holder: string, label: string) => `${label} + '=' + ${value(holder, "gmsaCredentialSpecName")} + '|' + ${value(holder, "gmsaCredentialSpec")}`;
  const podLevel = `(${set(spec)} ? [${place(spec, "'pod'")}] : [])`;
  const existing = (field: string) => (pod === "object" && field === "ephemeralContainers" ? " && c.name in variables.oldEphemeralNames" : "");
  const lists = containerLists.map(
    (field) => `(has(${spec}.${field}) ? ${spec}.${field}.filter(c, ${set("c")}${existing(field)}).map(c, ${place("c", `'${field}/' + c.name`)}) : [])`,
  );
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
  const onCreate = [`(${orphan(spec)})`, ...lists, orphanAnnotation].join(" || ");
  return `request.operation == 'CREATE' ? (${onCreate}) : variables.newEphemeral.exists(c, ${orphan("c")})`;
}

/** The API server's own authorizer, asked as the function asks: a LocalSubjectAccessReview in the pod's namespace. */
const useCheck = (principal: string, name: string) =>
  `${principal}.group('windows.k8s.io').resource('gmsacredentialspecs').namespace(request.namespace).name(${name}).check('use').allowed()`;
const serviceAccountAuthorizer = "authorizer.serviceAccount(request.namespace, variables.serviceAccount)";

/**
 * The API server charges 350 000 per authorizer check against a limit of 1 000 000 per expression
 * and 10 000 000 per policy evaluation (k8s.io/apiserver pkg/cel/library/cost.go and
 * pkg/apis/cel/config.go): so each check has a rule of its own, one per position in the list of
 * distinct names. This many distinct names are checked for the service account (half as many when
 * the requesting user is asked too); a pod that names more is refused, as the function refuses
 * more than GMSA_MAX_CREDSPECS_PER_POD (16 by default).
 */
export const checkedNamesPerPrincipal = 24;

/**
 * The places (pod, containers, annotations) whose names the policy reads, at most: the default of
 * the function's GMSA_MAX_PLACES_PER_POD. Finding the distinct names walks a list of positions
 * written out in the policy, so a pod with more places is refused rather than read in part.
 */
export const checkedPlaces = 64;

function useRules(principal: { readonly authorizer: string; readonly who: string; readonly grant: (name: string) => string }, positions: number) {
  return Array.from({ length: positions }, (_, i) => ({
    expression: `size(variables.distinct) <= ${i} || ${useCheck(principal.authorizer, `variables.distinct[${i}]`)}`,
    messageExpression: `'${who}: ' + ${principal.who} + ' is not authorized to use GMSACredentialSpec "' + variables.distinct[${i}] + '"' + ${principal.grant(`variables.distinct[${i}]`)}`,
    message: `${who}: the pod's service account or its requesting user is not authorized to use a GMSACredentialSpec the pod names`,
    reason: "Forbidden",
  }));
}

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

/**
 * Where the webhooks run: every namespace but kube-system and those labelled out. The canary's is
 * not left out: the canary asks for dry runs only, which the policies pass to the webhooks, and a
 * cluster wired without the canary may still hold its namespace.
 */
const namespaceSelector = {
  matchExpressions: [
    { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] },
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
      expression: `variables.checked.all(n, size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))`,
      messageExpression: `'${who}: "' + variables.checked.filter(n, !(size(n) <= 253 && n.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))[0] + '" is not a valid GMSACredentialSpec name'`,
      message: `${who}: a GMSA credential spec name is not a valid GMSACredentialSpec name`,
      reason: "Invalid",
    },
    {
      expression: `size(variables.checked) <= ${checkedPlaces}`,
      messageExpression: `'${who}: the pod sets GMSA credential spec names in ' + string(size(variables.checked)) + ' places; the in-cluster policy reads at most ${checkedPlaces}'`,
      reason: "Invalid",
    },
    {
      expression: `size(variables.distinct) <= ${positions}`,
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
      // A pod stored before any check may carry pod-level contents without a name: a new
      // ephemeral container naming no spec of its own would run under them, and no use can be asked.
      expression: `!(has(request.subResource) && request.subResource == 'ephemeralcontainers') || !(${hasWindowsOptions("object.spec")} && has(${windowsOptions("object.spec")}.gmsaCredentialSpec) && !has(${windowsOptions("object.spec")}.gmsaCredentialSpecName)) || !variables.newEphemeral.exists(c, !(${namesOwnCredSpec("c")}))`,
      message: `${who}: a new ephemeral container would run under the pod's GMSA credential spec contents, which name no credential spec, so nobody's use of it can be checked; name a credential spec in the container's own windowsOptions`,
      reason: "Invalid",
    },
    {
      expression: `!(${contentsWithoutName()})`,
      message: `${who}: GMSA credential spec contents are set without a credential spec name; set the gmsaCredentialSpecName of the same windowsOptions instead`,
      reason: "Invalid",
    },
    {
      expression: `request.operation != 'UPDATE' || (variables.settings.all(s, s in variables.oldSettings) && variables.oldSettings.all(s, s in variables.settings))`,
      message: `${who}: GMSA settings cannot be changed on an existing pod`,
      reason: "Forbidden",
    },
  ];
  return [...podPolicy(validations), ...bindingPolicy(), ...safetyNetCredSpecObjects()];
}

function podPolicy(validations: readonly object[]) {
  return denyingPolicy(safetyNetPodPolicyName, {
    matchConstraints: {
      namespaceSelector,
      resourceRules: [
        { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"] },
        // The status subresource writes the pod's annotations too: the alpha GMSA annotations among them.
        { apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods/ephemeralcontainers", "pods/status"] },
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
      { name: "oldEphemeralNames", expression: oldEphemeralNames },
      { name: "newEphemeral", expression: newEphemeral },
      // The names this request must be allowed to use, each once, in the order first read.
      { name: "checked", expression: checkedNames },
      {
        name: "distinct",
        expression: `[${Array.from({ length: checkedPlaces }, (_, i) => i).join(", ")}].filter(i, i < size(variables.checked) && variables.checked.indexOf(variables.checked[i]) == i).map(i, variables.checked[i])`,
      },
      {
        name: "serviceAccount",
        expression:
          "has(object.spec.serviceAccountName) && object.spec.serviceAccountName != '' ? object.spec.serviceAccountName : (has(object.spec.serviceAccount) && object.spec.serviceAccount != '' ? object.spec.serviceAccount : 'default')",
      },
      { name: "settings", expression: settingsOf("object") },
      { name: "oldSettings", expression: `oldObject == null ? [] : ${settingsOf("oldObject")}` },
    ],
    validations,
  });
}

function bindingPolicy() {
  return denyingPolicy(safetyNetBindingPolicyName, {
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
  });
}
