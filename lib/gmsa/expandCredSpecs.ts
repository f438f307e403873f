import { randomInt } from "node:crypto";
import { canonicalJson } from "./canonicalJson.js";
import { addOperation, type PatchOperation } from "./jsonPatch.js";
import { gmsaSettings, type GmsaSetting, type Pod } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { resolveCredSpecs } from "./resolveCredSpecs.js";
import { namesOf, shapeProblem } from "./settingChecks.js";
import { allowed, type Verdict } from "./verdict.js";

/**
 * The mutating webhook: wherever a pod names a credential spec and carries no contents, inline
 * the spec's contents. Contents already present are left for validation to compare. A name that
 * does not resolve is left alone too: validation, which runs after every mutation, judges `use`
 * before existence, so nobody learns from this webhook which credential specs exist.
 */
export async function expandCredSpecs(admission: PodAdmission, deps: PolicyDependencies): Promise<Verdict> {
  const settings = settingsToExpand(admission);
  if (settings.length === 0) return allowed();

  const warnings = settings.flatMap(deprecationWarning);
  const problem = shapeProblem(settings, false);
  if (problem) return { ...problem, warnings };

  const missing = settings.filter((s) => s.name !== undefined && s.contents === undefined);
  const names = namesOf(settings);
  const lookups = await resolveCredSpecs(deps.credSpecs, namesOf(missing), deps.signal);
  const patch: PatchOperation[] = [];
  for (const setting of missing) {
    const lookup = lookups.get(setting.name!);
    if (lookup?.kind === "found") patch.push(addOperation(setting.contentsPath, canonicalJson(lookup.credspec)));
  }

  if (deps.settings.randomHostname && admission.operation === "CREATE" && names.length > 0 && !admission.pod.spec?.hostname) {
    patch.push(addOperation(["spec", "hostname"], randomHostname()));
  }
  return allowed({ patch, warnings, credSpecs: names });
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

function deprecationWarning(setting: GmsaSetting): string[] {
  return (setting.deprecatedAnnotations ?? []).map(
    ({ annotation, replacedBy }) => `${setting.owner}: annotation ${annotation} is deprecated; use ${replacedBy} instead`,
  );
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
