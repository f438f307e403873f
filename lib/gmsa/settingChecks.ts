import { credSpecNameProblem } from "./credSpecName.js";
import type { GmsaSetting } from "./pod.js";
import { tooLargeReason } from "./credSpecSize.js";
import type { CredSpecLookup } from "./ports.js";
import { denied, type Verdict } from "../webhook/verdict.js";

/**
 * Checks that need no API call, in the order the user would fix them. Names that fail here are
 * never sent to the API server, and a pod that names more credential specs than any workload
 * needs is refused before a single one is looked up: each name costs the API server a request.
 * A pod that sets them in more places than any workload needs is refused too, before any lookup:
 * each place costs a patch operation carrying a whole credential spec.
 */
export function shapeProblem(
  settings: readonly GmsaSetting[],
  options: { readonly requireNames: boolean; readonly maxCredSpecs: number; readonly maxPlaces: number },
): Verdict | undefined {
  const orphan = settings.find((s) => s.containerMissing);
  if (orphan) {
    const annotation = orphan.deprecatedAnnotations?.[0]?.annotation ?? orphan.nameField;
    return denied(422, `${orphan.pod}: annotation ${truncate(annotation, 320)} names container "${truncate(orphan.containerName ?? "")}", which the pod does not have`);
  }
  // Before any lookup or patch: each place costs an operation carrying a whole credential spec.
  if (settings.length > options.maxPlaces) {
    return denied(
      422,
      `${settings[0]!.pod}: sets GMSA credential specs in ${settings.length} places (pod, containers, init and ephemeral containers, annotations); at most ${options.maxPlaces} are allowed in one pod`,
    );
  }
  const names = namesOf(settings);
  if (names.length > options.maxCredSpecs) {
    return denied(422, `${settings[0]!.pod}: names ${names.length} distinct GMSA credential specs; at most ${options.maxCredSpecs} are allowed in one pod`);
  }
  for (const setting of settings) {
    if (setting.name === undefined) {
      if (options.requireNames && setting.contents !== undefined) {
        return denied(422, `${setting.owner}: GMSA credential spec contents are set without a credential spec name; set ${setting.nameField} instead`);
      }
      continue;
    }
    const problem = credSpecNameProblem(setting.name);
    if (problem) {
      return denied(422, `${setting.owner}: "${truncate(setting.name)}" (${setting.nameField}) is not a valid GMSACredentialSpec name: ${problem}`);
    }
  }
  return undefined;
}

/** The denial for a credential spec that cannot be used, or undefined when it was found. */
export function lookupProblem(setting: GmsaSetting, name: string, lookup: CredSpecLookup | undefined): Verdict | undefined {
  switch (lookup?.kind) {
    case "found":
      return undefined;
    case "noCredspec":
      return denied(422, `${setting.owner}: GMSACredentialSpec "${name}" has no credspec object`, { credSpecs: [name] });
    case "tooLarge":
      return denied(422, `${setting.owner}: GMSACredentialSpec "${name}" ${tooLargeReason}; the webhook does not read it`, { credSpecs: [name] });
    case "notFound":
    case undefined:
      return denied(422, `${setting.owner}: GMSACredentialSpec "${name}" does not exist`, { credSpecs: [name] });
  }
}

// Names are user input: keep messages short even when the input is not.
function truncate(text: string, max = 80): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

export function namesOf(settings: readonly GmsaSetting[]): string[] {
  const names = new Set<string>();
  for (const setting of settings) if (setting.name !== undefined) names.add(setting.name);
  return [...names];
}
