import { randomInt } from "node:crypto";
import { canonicalContents } from "./credSpecContents.js";
import { addOperation, type PatchOperation } from "../webhook/jsonPatch.js";
import { gmsaSettings, type GmsaSetting, type Pod } from "./pod.js";
import { isBinding, type Admission, type PodAdmission, type PolicyDependencies } from "./podAdmission.js";
import { sharedHostnameWarning } from "./hostnameWarning.js";
import { resolveCredSpecs } from "./resolveCredSpecs.js";
import { namesOf, shapeProblem } from "./settingChecks.js";
import { firstRefusal, usePrincipals } from "./usePrincipals.js";
import { allowed, denied, type Verdict } from "../webhook/verdict.js";

/**
 * The most credential spec text one admission inlines (UTF-16 units, about bytes for the ASCII a
 * spec holds). The API server stores objects up to about 1.5 MiB, so a pod past this could not be
 * stored anyway; building and sending such a patch would only hold up other admissions.
 */
export const maxInlinedBytes = 512 * 1024;

/**
 * The mutating webhook: wherever a pod names a credential spec and carries no contents, inline
 * the spec's contents, but only where every principal that must hold `use` holds it. Anyone who
 * can reach this endpoint can send a made-up review, so a name the pod's service account may not
 * use is never looked up: it is left alone, exactly like a name that does not exist, and
 * validation refuses the pod. Contents already present are left for validation to compare.
 */
export async function expandCredSpecs(admission: Admission, deps: PolicyDependencies): Promise<Verdict> {
  // Bindings are the validating webhook's business; they carry nothing to inline.
  if (isBinding(admission)) return allowed();
  const settings = settingsToExpand(admission);
  if (settings.length === 0) return allowed();

  const warnings = fewWarnings(settings.flatMap(deprecationWarning));
  const problem = shapeProblem(settings, { requireNames: false, maxCredSpecs: deps.settings.maxCredSpecsPerPod, maxPlaces: deps.settings.maxPlacesPerPod });
  if (problem) return { ...problem, warnings };

  const missing = settings.filter((s) => s.name !== undefined && s.contents === undefined);
  const names = namesOf(settings);
  const usable = await usableNames(admission, namesOf(missing), deps);
  const lookups = await resolveCredSpecs(deps.credSpecs, usable, deps.call);
  const patch: PatchOperation[] = [];
  let inlinedBytes = 0;
  for (const setting of missing) {
    const lookup = lookups.get(setting.name!);
    if (lookup?.kind !== "found") continue;
    const contents = canonicalContents(lookup.credspec);
    inlinedBytes += contents.length;
    if (inlinedBytes > maxInlinedBytes) {
      return denied(
        422,
        `${setting.pod}: inlining its GMSA credential specs would add more than ${maxInlinedBytes / 1024} KiB to the pod; name fewer places, or keep the credential spec small`,
        {
          warnings,
          credSpecs: names,
        },
      );
    }
    patch.push(addOperation(setting.contentsPath, contents));
  }

  const inlined = patch.length;
  if (deps.settings.randomHostname && admission.operation === "CREATE" && names.length > 0 && !admission.pod.spec?.hostname) {
    patch.push(addOperation(["spec", "hostname"], randomHostname()));
  } else if (admission.operation === "CREATE" && !deps.settings.randomHostname) {
    const shared = sharedHostnameWarning(admission.pod, settings[0]!.pod, names);
    if (shared) warnings.push(shared);
  }
  const unchanged = missing.length > 0 && inlined === 0 ? notInlined(namesOf(missing), usable, lookups) : undefined;
  return allowed({ patch, warnings, credSpecs: names, ...(unchanged === undefined ? {} : { unchanged }) });
}

/** Why nothing was inlined, name by name, for the log line (the validating webhook tells the pod's creator). */
function notInlined(names: readonly string[], usable: readonly string[], lookups: ReadonlyMap<string, { readonly kind: string }>): string {
  const why = names.map((name) => {
    if (!usable.includes(name)) return `"${name}" (use not confirmed)`;
    const kind = lookups.get(name)?.kind;
    return `"${name}" (${kind === "notFound" ? "does not exist" : kind === "tooLarge" ? "too large to read" : "holds no credspec"})`;
  });
  return `nothing inlined: ${why.join(", ")}; the validating webhook decides`;
}

/**
 * The names confirmed usable by every principal; none when a principal cannot even be named.
 * Asking stops at the first refusal: validation refuses such a pod whatever mutation does, and
 * what it has not confirmed it does not inline.
 */
async function usableNames(admission: PodAdmission, names: readonly string[], deps: PolicyDependencies): Promise<readonly string[]> {
  if (names.length === 0) return [];
  const who = usePrincipals(admission, deps);
  if ("problem" in who) return [];
  return (await firstRefusal(names, who.principals, admission.namespace, deps)).confirmed;
}

/** CREATE: the whole pod. UPDATE: only ephemeral containers the update adds. */
function settingsToExpand(admission: PodAdmission): GmsaSetting[] {
  const settings = gmsaSettings(admission.pod, admission.name);
  if (admission.operation === "CREATE") return settings;
  if (admission.operation === "UPDATE" && admission.oldPod) return settingsOfNewEphemeralContainers(settings, admission.oldPod);
  return [];
}

export function settingsOfNewEphemeralContainers(settings: readonly GmsaSetting[], oldPod: Pod): GmsaSetting[] {
  const existing = new Set((oldPod.spec?.ephemeralContainers ?? []).map((c) => c.name));
  return settings.filter((s) => s.source === "field" && s.containerKind === "ephemeralContainer" && !existing.has(s.containerName!));
}

/**
 * The pod-level names each new ephemeral container runs under because it names none of its own,
 * one setting per container and name. Whoever adds such a container uses that credential spec
 * as surely as if the container named it, so the update asks `use` of these too. Their contents
 * are the pod's, already checked when the pod was created: only `use` is in question, and there
 * is nothing to inline.
 */
export function settingsInheritedByNewEphemeralContainers(settings: readonly GmsaSetting[], pod: Pod, oldPod: Pod): GmsaSetting[] {
  const podLevel = settings.filter((s) => (s.key === "field:pod" || s.key === "annotation:pod") && s.name !== undefined);
  if (podLevel.length === 0) return [];
  return newEphemeralContainersNamingNone(settings, pod, oldPod).flatMap((c) =>
    podLevel.map((from) => ({
      ...from,
      key: `inherited:ephemeralContainer/${c.name}/${from.key}`,
      owner: `ephemeral container "${c.name}" of ${from.pod} (inheriting the pod's credential spec)`,
      containerKind: "ephemeralContainer" as const,
      containerName: c.name,
      contents: undefined,
      deprecatedAnnotations: undefined,
    })),
  );
}

/**
 * The ephemeral containers an update adds that name no credential spec of their own, and so run
 * under the pod-level one. Only a field names a container's own spec: the kubelet reads no
 * annotation, so a container annotation naming such a container leaves it running under the pod's.
 */
function newEphemeralContainersNamingNone(settings: readonly GmsaSetting[], pod: Pod, oldPod: Pod): ReadonlyArray<{ readonly name: string }> {
  const existing = new Set((oldPod.spec?.ephemeralContainers ?? []).map((c) => c.name));
  const namingTheirOwn = new Set(settings.filter((s) => s.source === "field" && s.containerKind === "ephemeralContainer" && s.name !== undefined).map((s) => s.containerName));
  return (pod.spec?.ephemeralContainers ?? []).filter((c) => !existing.has(c.name) && !namingTheirOwn.has(c.name));
}

/**
 * The new ephemeral containers that would run under pod-level contents no name vouches for: a pod
 * stored before any webhook or policy could carry `gmsaCredentialSpec` without a name, and a
 * container naming no spec of its own runs under it. No check can ask `use` of a name that is
 * not there, so such a container is refused rather than admitted unasked.
 */
export function newEphemeralContainersUnderUnnamedContents(settings: readonly GmsaSetting[], pod: Pod, oldPod: Pod): string[] {
  const podLevel = settings.find((s) => s.key === "field:pod");
  if (podLevel === undefined || podLevel.contents === undefined || podLevel.name !== undefined) return [];
  return newEphemeralContainersNamingNone(settings, pod, oldPod).map((c) => c.name);
}

// The API server passes warnings on to the client as headers: a pod with thousands of alpha
// annotations must not turn into thousands of them.
const maxWarnings = 10;

function fewWarnings(warnings: string[]): string[] {
  if (warnings.length <= maxWarnings) return warnings;
  return [...warnings.slice(0, maxWarnings), `and ${warnings.length - maxWarnings} more deprecated GMSA annotations`];
}

function deprecationWarning(setting: GmsaSetting): string[] {
  return (setting.deprecatedAnnotations ?? []).map(({ annotation, replacedBy }) => `${setting.owner}: annotation ${annotation} is deprecated; use ${replacedBy} instead`);
}

// A NetBIOS computer name is at most 15 characters; start with a letter so it is also a valid
// DNS label that cannot be mistaken for a number.
const hostnameLength = 15;
const letters = "abcdefghijklmnopqrstuvwxyz";
const alphanumerics = `${letters}0123456789`;

export function randomHostname(): string {
  let name = letters[randomInt(letters.length)]!;
  while (name.length < hostnameLength) name += alphanumerics[randomInt(alphanumerics.length)]!;
  return name;
}
