/**
 * CEL conditions under which the API server calls the webhooks at all: only pods that carry GMSA
 * settings (fields at any level of any container kind, or the alpha annotations), in the new
 * object or, on UPDATE, the old one. Every other pod never waits on the webhook, so an outage
 * of it cannot keep DaemonSets or system pods from starting.
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

export function gmsaMatchConditions() {
  return [{ name: "pod-has-gmsa-settings", expression: `(${podHasGmsaSettings("object")}) || (${podHasGmsaSettings("oldObject")})` }];
}
