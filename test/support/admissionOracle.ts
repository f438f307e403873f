import { parse } from "@humanwhocodes/momoa";
import { canonicalJson, jsonEqual } from "../../lib/gmsa/canonicalJson.js";
import type { CredSpecLookup } from "../../lib/gmsa/ports.js";

/**
 * An independent reading of what a webhook answer may never be, for randomly generated and
 * damaged reviews: it reads the raw JSON itself rather than through the policy's pod walker.
 * `violations` lists every way an answer breaks the promise (empty when it keeps it):
 * never allowed while carrying contents that differ from the named spec, never contents inlined
 * for a principal without `use`.
 */
export interface OracleWorld {
  readonly lookup: (name: string) => CredSpecLookup;
  /** Whether every principal that must hold `use` for this pod holds it. */
  readonly mayUse: (name: string) => boolean;
}

interface Place {
  readonly id: string;
  readonly name?: unknown;
  readonly contents?: unknown;
}

const lists = ["containers", "initContainers", "ephemeralContainers"] as const;
const annotationKey = /^(pod|(.+)\.container)\.alpha\.windows\.kubernetes\.io\/gmsa-credential-spec(-name)?$/;

function field(value: unknown, ...path: Array<string | number>): unknown {
  let at = value;
  for (const step of path) {
    if (typeof at !== "object" || at === null) return undefined;
    at = (at as Record<string | number, unknown>)[step];
  }
  return at;
}

const present = (v: unknown) => v !== undefined && v !== null;

/** Every place of a raw pod that names a spec or carries contents. */
export function gmsaPlaces(pod: unknown): Place[] {
  const places: Place[] = [];
  const add = (id: string, options: unknown) => {
    const name = field(options, "gmsaCredentialSpecName");
    const contents = field(options, "gmsaCredentialSpec");
    if (present(name) || present(contents)) places.push({ id, name, contents });
  };
  add("pod", field(pod, "spec", "securityContext", "windowsOptions"));
  for (const list of lists) {
    const containers = field(pod, "spec", list);
    if (!Array.isArray(containers)) continue;
    containers.forEach((c) => add(`${list}/${String(field(c, "name"))}`, field(c, "securityContext", "windowsOptions")));
  }
  const annotations = field(pod, "metadata", "annotations");
  if (typeof annotations === "object" && annotations !== null) {
    const byPrefix = new Map<string, { name?: unknown; contents?: unknown }>();
    for (const [key, value] of Object.entries(annotations)) {
      const match = annotationKey.exec(key);
      if (!match) continue;
      const entry = byPrefix.get(match[1]!) ?? {};
      if (match[3]) entry.name = value;
      else entry.contents = value;
      byPrefix.set(match[1]!, entry);
    }
    for (const [prefix, entry] of byPrefix) places.push({ id: `annotation/${prefix}`, ...entry });
  }
  return places;
}

function hasDuplicateKey(text: string): boolean {
  let root;
  try {
    root = parse(text).body;
  } catch {
    return true;
  }
  const pending = [root];
  while (pending.length > 0) {
    const node = pending.pop()!;
    if (node.type === "Array") pending.push(...node.elements.map((e) => e.value));
    if (node.type === "Object") {
      const keys = node.members.map((m) => (m.name.type === "String" ? m.name.value : m.name.name));
      if (new Set(keys).size !== keys.length) return true;
      pending.push(...node.members.map((m) => m.value));
    }
  }
  return false;
}

/** Why a place could not have passed the CREATE checks, or undefined when it could. */
function createProblem(place: Place, world: OracleWorld): string | undefined {
  if (typeof place.name !== "string") return `${place.id}: carries contents without a name`;
  if (!world.mayUse(place.name)) return `${place.id}: "${place.name}" may not be used`;
  const lookup = world.lookup(place.name);
  if (lookup.kind !== "found") return `${place.id}: "${place.name}" is ${lookup.kind}`;
  if (!present(place.contents)) return undefined;
  if (typeof place.contents !== "string") return `${place.id}: contents are not a string`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(place.contents);
  } catch {
    return `${place.id}: contents are not JSON`;
  }
  if (!jsonEqual(parsed, lookup.credspec)) return `${place.id}: contents differ from "${place.name}"`;
  if (place.contents.length < 10_000 && hasDuplicateKey(place.contents)) return `${place.id}: contents repeat a key`;
  return undefined;
}

const same = (a: Place, b: Place) => a.id === b.id && a.name === b.name && a.contents === b.contents;

/**
 * An allowed validation: every place passed CREATE, or (UPDATE) was there unchanged before; and
 * an ephemeral container the update adds without a name of its own runs under the pod-level
 * names, which every principal must be able to use.
 */
export function validateViolations(operation: string, object: unknown, oldObject: unknown, world: OracleWorld): string[] {
  const before = operation === "UPDATE" ? gmsaPlaces(oldObject) : [];
  const places = gmsaPlaces(object);
  const placeProblems = places.flatMap((place) => {
    if (before.some((old) => same(old, place))) return [];
    const problem = createProblem(place, world);
    return problem ? [problem] : [];
  });
  return operation === "UPDATE" ? [...placeProblems, ...inheritedProblems(object, oldObject, places, world)] : placeProblems;
}

function inheritedProblems(object: unknown, oldObject: unknown, places: readonly Place[], world: OracleWorld): string[] {
  const names = (pod: unknown) => {
    const list = field(pod, "spec", "ephemeralContainers");
    return Array.isArray(list) ? list.map((c) => field(c, "name")) : [];
  };
  const existing = new Set(names(oldObject));
  const podNames = places.filter((p) => p.id === "pod" || p.id === "annotation/pod").flatMap((p) => (typeof p.name === "string" ? [p.name] : []));
  // Contents at pod level without a name (a pod stored before any check): nobody's use can be asked.
  const unnamedPodContents = places.some((p) => p.id === "pod" && typeof p.name !== "string" && p.contents !== undefined);
  return (
    names(object)
      .filter((c) => !existing.has(c))
      // Only a field names a container's own spec: the kubelet reads no annotation.
      .filter((c) => !places.some((p) => p.id === `ephemeralContainers/${String(c)}` && typeof p.name === "string"))
      .flatMap((c) => [
        ...(unnamedPodContents ? [`ephemeral container ${String(c)} added under pod-level contents that name no spec`] : []),
        ...podNames.filter((name) => !world.mayUse(name)).map((name) => `ephemeral container ${String(c)} added under "${name}", which may not be used`),
      ])
  );
}

/** Every contents a mutation adds belongs to a name all principals may use, and is the spec. */
export function mutateViolations(object: unknown, patch: ReadonlyArray<{ op: string; path: string; value: unknown }>, world: OracleWorld): string[] {
  return patch.flatMap((op) => {
    if (op.path === "/spec/hostname") return [];
    const segments = op.path
      .split("/")
      .slice(1)
      .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
    let name: unknown;
    if (segments[0] === "metadata" && segments[1] === "annotations" && segments.length === 3 && segments[2]!.endsWith("/gmsa-credential-spec")) {
      name = field(object, "metadata", "annotations", `${segments[2]}-name`);
    } else if (segments.at(-1) === "gmsaCredentialSpec") {
      name = field(object, ...segments.slice(0, -1).map((s) => (/^\d+$/.test(s) ? Number(s) : s)), "gmsaCredentialSpecName");
    } else {
      return [`${op.path}: a patch outside any GMSA place`];
    }
    if (typeof name !== "string") return [`${op.path}: contents added where no name is`];
    if (!world.mayUse(name)) return [`${op.path}: contents of "${name}" inlined for a principal without use`];
    const lookup = world.lookup(name);
    if (lookup.kind !== "found") return [`${op.path}: contents added for "${name}", which is ${lookup.kind}`];
    if (op.value !== canonicalJson(lookup.credspec)) return [`${op.path}: contents added are not "${name}"`];
    return [];
  });
}
