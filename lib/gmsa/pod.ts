import * as t from "io-ts";
import { checkedDecode, optional } from "../checkedDecode.js";

/**
 * The parts of a Pod the GMSA policy reads. Everything else passes through untouched: the
 * original JSON is what gets patched, these codecs only decide what policy may rely on.
 * Kubernetes omits empty fields, but hand-written requests may carry `null`: both mean absent
 * (`optional`).
 */

export const WindowsOptions = t.partial({
  gmsaCredentialSpecName: optional(t.string),
  gmsaCredentialSpec: optional(t.string),
});

const SecurityContext = t.partial({ windowsOptions: optional(WindowsOptions) });

export const Container = t.intersection([t.type({ name: t.string }), t.partial({ securityContext: optional(SecurityContext) })]);
export type Container = t.TypeOf<typeof Container>;

export const Pod = t.intersection([
  t.type({ kind: t.literal("Pod") }),
  t.partial({
    metadata: optional(
      t.partial({
        name: optional(t.string),
        generateName: optional(t.string),
        namespace: optional(t.string),
        annotations: optional(t.record(t.string, t.string)),
        ownerReferences: optional(t.array(t.partial({ controller: optional(t.boolean) }))),
      }),
    ),
    spec: optional(
      t.partial({
        securityContext: optional(SecurityContext),
        containers: optional(t.array(Container)),
        initContainers: optional(t.array(Container)),
        ephemeralContainers: optional(t.array(Container)),
        serviceAccountName: optional(t.string),
        serviceAccount: optional(t.string),
        hostname: optional(t.string),
      }),
    ),
  }),
]);
export type Pod = t.TypeOf<typeof Pod>;

/**
 * Decodes a pod as `Pod` does, with `Pod`'s own errors when it is not one: `is` first, which
 * tries a union's members without building a context for each (most of the cost of decoding a
 * pod), then `decode` only for a pod it refuses.
 */
export function decodePodObject(value: unknown): t.Validation<Pod> {
  return checkedDecode(Pod, value);
}

export type ContainerKind = "container" | "initContainer" | "ephemeralContainer";

const containerLists: ReadonlyArray<{ kind: ContainerKind; field: "containers" | "initContainers" | "ephemeralContainers"; label: string }> = [
  { kind: "container", field: "containers", label: "container" },
  { kind: "initContainer", field: "initContainers", label: "init container" },
  { kind: "ephemeralContainer", field: "ephemeralContainers", label: "ephemeral container" },
];

const podAnnotationPrefix = "pod.alpha.windows.kubernetes.io/";
const containerAnnotationSuffix = ".container.alpha.windows.kubernetes.io/";
const nameKey = "gmsa-credential-spec-name";
const contentsKey = "gmsa-credential-spec";

/**
 * One place in a pod that can carry GMSA settings: a windowsOptions block (pod level or one
 * container of any kind) or a pair of alpha annotations. `key` identifies the place across the
 * old and new object of an UPDATE.
 */
export interface GmsaSetting {
  readonly key: string;
  readonly source: "field" | "annotation";
  /** The pod, as it reads in messages: `pod "web"`. */
  readonly pod: string;
  /** Who the setting belongs to, as it reads in messages: `pod "web"`, `init container "setup"`. */
  readonly owner: string;
  readonly containerKind?: ContainerKind;
  readonly containerName?: string;
  readonly name?: string;
  readonly contents?: string;
  /** Where the contents live, as JSON Pointer segments from the pod's root. */
  readonly contentsPath: ReadonlyArray<string | number>;
  /** Where the name lives, for messages: `spec.initContainers[0].securityContext...`. */
  readonly nameField: string;
  /** A container's alpha annotations that name a container the pod does not have. */
  readonly containerMissing?: boolean;
  /** For annotations: each alpha annotation present, with the field that replaces it. */
  readonly deprecatedAnnotations?: ReadonlyArray<{ readonly annotation: string; readonly replacedBy: string }>;
}

function podLabel(pod: Pod, fallbackName?: string): string {
  const name = pod.metadata?.name || fallbackName;
  if (name) return `pod "${name}"`;
  const generateName = pod.metadata?.generateName;
  return generateName ? `pod "${generateName}" (name to be generated)` : "pod";
}

function present(value: string | null | undefined): string | undefined {
  return value === null ? undefined : value;
}

/**
 * Every place of the pod that names a credential spec or carries its contents, in a stable
 * order: pod level, containers, init containers, ephemeral containers, then annotations.
 * Mutation, validation and the UPDATE rules all walk pods through this one function.
 */
export function gmsaSettings(pod: Pod, podName?: string): GmsaSetting[] {
  const pod_ = podLabel(pod, podName);
  const settings: GmsaSetting[] = [];
  const podOptions = pod.spec?.securityContext?.windowsOptions;
  if (podOptions && (podOptions.gmsaCredentialSpecName != null || podOptions.gmsaCredentialSpec != null)) {
    settings.push({
      key: "field:pod",
      source: "field",
      pod: pod_,
      owner: pod_,
      name: present(podOptions.gmsaCredentialSpecName),
      contents: present(podOptions.gmsaCredentialSpec),
      contentsPath: ["spec", "securityContext", "windowsOptions", "gmsaCredentialSpec"],
      nameField: "spec.securityContext.windowsOptions.gmsaCredentialSpecName",
    });
  }
  for (const list of containerLists) {
    (pod.spec?.[list.field] ?? []).forEach((container, index) => {
      const options = container.securityContext?.windowsOptions;
      if (!options || (options.gmsaCredentialSpecName == null && options.gmsaCredentialSpec == null)) return;
      settings.push({
        key: `field:${list.kind}/${container.name}`,
        source: "field",
        pod: pod_,
        owner: `${list.label} "${container.name}" of ${pod_}`,
        containerKind: list.kind,
        containerName: container.name,
        name: present(options.gmsaCredentialSpecName),
        contents: present(options.gmsaCredentialSpec),
        contentsPath: ["spec", list.field, index, "securityContext", "windowsOptions", "gmsaCredentialSpec"],
        nameField: `spec.${list.field}[${index}].securityContext.windowsOptions.gmsaCredentialSpecName`,
      });
    });
  }
  const annotations = pod.metadata?.annotations ?? {};
  // Only a container's alpha annotations need to know where the container is.
  let containerFields: ReadonlyMap<string, ContainerField> | undefined;
  for (const prefix of annotationPrefixes(annotations)) {
    const name = annotations[prefix + nameKey];
    const contents = annotations[prefix + contentsKey];
    if (prefix === podAnnotationPrefix) {
      settings.push({
        key: "annotation:pod",
        source: "annotation",
        pod: pod_,
        owner: pod_,
        name,
        contents,
        contentsPath: ["metadata", "annotations", prefix + contentsKey],
        nameField: `annotation ${prefix + nameKey}`,
        deprecatedAnnotations: replacements(annotations, prefix, "spec.securityContext.windowsOptions"),
      });
      continue;
    }
    const containerName = prefix.slice(0, -containerAnnotationSuffix.length);
    const field = (containerFields ??= containerFieldsOf(pod)).get(containerName);
    settings.push({
      key: `annotation:container/${containerName}`,
      source: "annotation",
      pod: pod_,
      owner: `${containerLists.find((l) => l.kind === field?.kind)?.label ?? "container"} "${containerName}" of ${pod_}`,
      ...(field ? { containerKind: field.kind } : { containerMissing: true }),
      containerName,
      name,
      contents,
      contentsPath: ["metadata", "annotations", prefix + contentsKey],
      nameField: `annotation ${prefix + nameKey}`,
      deprecatedAnnotations: replacements(
        annotations,
        prefix,
        field ? `spec.${field.field}[${field.index}].securityContext.windowsOptions` : `the windowsOptions of container "${containerName}"`,
      ),
    });
  }
  return settings;
}

interface ContainerField {
  readonly kind: ContainerKind;
  readonly index: number;
  readonly field: string;
}

/** Where each container of the pod is, by name; a name given twice is where it first appears. */
function containerFieldsOf(pod: Pod): ReadonlyMap<string, ContainerField> {
  const fields = new Map<string, ContainerField>();
  for (const list of containerLists) {
    (pod.spec?.[list.field] ?? []).forEach((container, index) => {
      if (!fields.has(container.name)) fields.set(container.name, { kind: list.kind, index, field: list.field });
    });
  }
  return fields;
}

function replacements(annotations: Record<string, string>, prefix: string, windowsOptions: string) {
  return [
    { key: prefix + nameKey, field: "gmsaCredentialSpecName" },
    { key: prefix + contentsKey, field: "gmsaCredentialSpec" },
  ]
    .filter(({ key }) => annotations[key] !== undefined)
    .map(({ key, field }) => ({ annotation: key, replacedBy: `${windowsOptions}.${field}` }));
}

/** The prefix (pod or `<container>.container...`) of a GMSA alpha annotation key, if it is one. */
function gmsaAnnotationPrefix(key: string): string | undefined {
  for (const suffix of [nameKey, contentsKey]) {
    if (!key.endsWith(suffix)) continue;
    const prefix = key.slice(0, -suffix.length);
    if (prefix === podAnnotationPrefix || (prefix.endsWith(containerAnnotationSuffix) && prefix.length > containerAnnotationSuffix.length)) {
      return prefix;
    }
  }
  return undefined;
}

/** The keys among `annotations` that this policy reads as GMSA settings, pod or container. */
export function gmsaAnnotationKeys(annotations: Readonly<Record<string, string>>): string[] {
  return Object.keys(annotations).filter((key) => gmsaAnnotationPrefix(key) !== undefined);
}

/** The distinct annotation prefixes (pod or `<container>.container...`) that carry GMSA keys. */
function annotationPrefixes(annotations: Record<string, string>): string[] {
  const keys = gmsaAnnotationKeys(annotations);
  if (keys.length === 0) return [];
  const prefixes = new Set<string>();
  for (const key of keys.sort()) prefixes.add(gmsaAnnotationPrefix(key)!);
  // The pod's own annotations first, then containers by name.
  return [...prefixes].sort((a, b) => Number(b === podAnnotationPrefix) - Number(a === podAnnotationPrefix));
}

export function serviceAccountOf(pod: Pod): string {
  return pod.spec?.serviceAccountName || pod.spec?.serviceAccount || "default";
}
