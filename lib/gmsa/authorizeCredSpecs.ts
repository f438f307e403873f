import { contentsProblem } from "./credSpecContents.js";
import type { GmsaSetting } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { resolveCredSpecs } from "./resolveCredSpecs.js";
import { lookupProblem, namesOf, shapeProblem } from "./settingChecks.js";
import { withSuggestions } from "./suggestCredSpecs.js";
import { useGrantAdvice } from "./useGrant.js";
import { firstRefusal, usePrincipals, type UsePrincipal } from "./usePrincipals.js";
import { allowed, denied, type Verdict } from "../webhook/verdict.js";

/**
 * The CREATE checks of the validating webhook, for the given settings: every name is valid,
 * `use`-able by the pod's service account (and the requesting user when that is on), exists,
 * and any contents equal the named spec. Authorization is settled before anything is looked
 * up, so nobody learns which credential specs exist by naming ones they may not use, and a
 * refused name costs the API server no read. Names are judged in order and judging stops at
 * the first refusal, so the denial names the first refused setting.
 */
export async function authorizeCredSpecs(admission: PodAdmission, settings: readonly GmsaSetting[], deps: PolicyDependencies): Promise<Verdict> {
  const problem = shapeProblem(settings, { requireNames: true, maxCredSpecs: deps.settings.maxCredSpecsPerPod, maxPlaces: deps.settings.maxPlacesPerPod });
  if (problem) return problem;
  const names = namesOf(settings);
  if (names.length === 0) return allowed();

  const use = await authorizeUse(admission, settings, deps);
  if ("refusal" in use) return use.refusal;

  const lookups = await resolveCredSpecs(deps.credSpecs, names, deps.call);
  for (const setting of settings) {
    const name = setting.name;
    if (name === undefined) continue;
    const lookup = lookups.get(name);
    const missing = lookupProblem(setting, name, lookup);
    if (missing?.kind === "denied") {
      return lookup?.kind === "notFound" && deps.settings.suggestAfterRefusal === true ? withSuggestions(missing, name, use.principals, admission.namespace, deps) : missing;
    }
    if (setting.contents !== undefined && lookup?.kind === "found") {
      const mismatch = contentsProblem(setting.contents, lookup.credspec);
      if (mismatch) return denied(422, `${setting.owner}: ${mismatch} GMSACredentialSpec "${name}"`, { credSpecs: [name] });
    }
  }
  return allowed({ credSpecs: names });
}

/**
 * The `use` half of the checks: every principal that must hold `use` holds it on every name the
 * settings carry. Returns the denial for the first refused setting, or the principals asked.
 */
export async function authorizeUse(
  admission: PodAdmission,
  settings: readonly GmsaSetting[],
  deps: PolicyDependencies,
): Promise<{ readonly refusal: Verdict } | { readonly principals: readonly UsePrincipal[] }> {
  const names = namesOf(settings);
  if (names.length === 0) return { principals: [] };
  const who = usePrincipals(admission, deps);
  if ("problem" in who) {
    return { refusal: denied(403, `${settings[0]!.owner}: ${who.problem} for GMSACredentialSpec ${names.map((n) => `"${n}"`).join(", ")}`, { credSpecs: names }) };
  }
  const { refused } = await firstRefusal(names, who.principals, admission.namespace, deps);
  if (!refused) return { principals: who.principals };
  const owner = settings.find((s) => s.name === refused.name)!.owner;
  const advice = useGrantAdvice(refused.name, admission.namespace, refused.by.grantee);
  // The advice must hold when the name is wrong too: granting a typo makes a Role for nothing. So
  // it is conditional; explain (an operator's tool) adds the names close to it the pod may use.
  const refusal = {
    ...denied(403, `${owner}: ${refused.by.description} is not authorized to use GMSACredentialSpec "${refused.name}"; if the name is right, ${advice}`, {
      credSpecs: [refused.name],
    }),
    kind: "denied" as const,
  } as Verdict & { kind: "denied" };
  return { refusal: deps.settings.suggestAfterRefusal === true ? await withSuggestions(refusal, refused.name, who.principals, admission.namespace, deps) : refusal };
}
