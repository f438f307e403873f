/**
 * CEL conditions under which the API server calls the webhooks at all. CREATE: only pods that
 * carry GMSA settings (fields at any level of any container kind, or the alpha annotations).
 * Adding ephemeral containers: only when the pod then carries any. Any other UPDATE: only when
 * the GMSA annotations differ — the API server's own pod validation already forbids changing
 * securityContext on a running pod, so labels, finalizers and status of GMSA pods never wait on
 * the webhook. Every other pod never waits on it either, so an outage of the webhook cannot keep
 * DaemonSets or system pods from starting.
 *
 * A Binding (the scheduler's, or anyone's with `create` on pods/binding) has its annotations
 * copied onto the pod it binds, so one that carries a GMSA annotation key is a change of GMSA
 * settings and goes to validation. Every other Binding — every scheduling decision — never
 * waits on the webhook. The Binding test comes first: a Binding has no spec, and the pod
 * expression would fail on it.
 */
function windowsOptionsSet(holder: string): string {
  const options = `${holder}.securityContext.windowsOptions`;
  return `(has(${holder}.securityContext) && has(${options}) && (has(${options}.gmsaCredentialSpecName) || has(${options}.gmsaCredentialSpec)))`;
}

function containersSet(spec: string, field: string): string {
  return `(has(${spec}.${field}) && ${spec}.${field}.exists(c, ${windowsOptionsSet("c")}))`;
}

const annotationSuffixes = [".alpha.windows.kubernetes.io/gmsa-credential-spec-name", ".alpha.windows.kubernetes.io/gmsa-credential-spec"];

/** A CEL expression that is true when `pod` (a variable: object or oldObject) has GMSA settings. */
export function podHasGmsaSettings(pod: string): string {
  const spec = `${pod}.spec`;
  const annotations = `${pod}.metadata.annotations`;
  const annotated = `(has(${pod}.metadata.annotations) && ${annotations}.exists(k, ${annotationSuffixes.map((s) => `k.endsWith('${s}')`).join(" || ")}))`;
  return [
    `${pod} != null`,
    `(${[windowsOptionsSet(spec), containersSet(spec, "containers"), containersSet(spec, "initContainers"), containersSet(spec, "ephemeralContainers"), annotated].join(" || ")})`,
  ].join(" && ");
}

const isGmsaAnnotation = (key: string) => annotationSuffixes.map((s) => `${key}.endsWith('${s}')`).join(" || ");

/** True when a GMSA annotation of `pod` is missing from `other` or has another value there. */
function annotationsNotIn(pod: string, other: string): string {
  const mine = `${pod}.metadata.annotations`;
  const theirs = `${other}.metadata.annotations`;
  return `(has(${mine}) && ${mine}.exists(k, (${isGmsaAnnotation("k")}) && !(has(${theirs}) && k in ${theirs} && ${theirs}[k] == ${mine}[k])))`;
}

function gmsaAnnotationsDiffer(): string {
  return `${annotationsNotIn("object", "oldObject")} || ${annotationsNotIn("oldObject", "object")}`;
}

/** True when `object` (a Binding) carries any GMSA annotation key, whatever its value. */
function bindingCarriesGmsaAnnotations(): string {
  return `(object != null && has(object.metadata) && has(object.metadata.annotations) && object.metadata.annotations.exists(k, ${isGmsaAnnotation("k")}))`;
}

export function gmsaMatchConditions() {
  const expression = [
    `request.kind.kind == 'Binding'`,
    `? ${bindingCarriesGmsaAnnotations()}`,
    // subResource is absent, not empty, for the pod itself.
    `: (request.operation == 'CREATE' || (has(request.subResource) && request.subResource == 'ephemeralcontainers'))`,
    `? (${podHasGmsaSettings("object")})`,
    `: (object != null && oldObject != null && (${gmsaAnnotationsDiffer()}))`,
  ].join(" ");
  return [{ name: "pod-gmsa-settings-in-play", expression }];
}
