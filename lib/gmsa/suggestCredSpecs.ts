import type { PolicyDependencies } from "./podAdmission.js";
import { similarNames } from "./similarNames.js";
import { refusedUse, type UsePrincipal } from "./usePrincipals.js";
import { denied, type Verdict } from "../webhook/verdict.js";

/**
 * A 422 for a name that does not exist, with the existing names close to it that every principal
 * of the pod may `use`. Whoever can create this pod can already run it as that service account
 * and so use those specs: naming them tells the caller nothing it could not try. A name the
 * principals may not use is never shown. Suggestions are a courtesy: when the names are not
 * known without a list call, or a review fails, the denial goes out without them.
 */
export async function withSuggestions(
  denial: Verdict & { kind: "denied" },
  name: string,
  principals: readonly UsePrincipal[],
  namespace: string,
  deps: PolicyDependencies,
): Promise<Verdict> {
  const known = deps.credSpecs.knownNames?.();
  if (!known) return denial;
  const candidates = similarNames(name, known);
  if (candidates.length === 0) return denial;
  let usable: string[];
  try {
    const refused = await refusedUse(candidates, principals, namespace, deps);
    usable = candidates.filter((candidate) => !refused.has(candidate));
  } catch {
    return denial;
  }
  if (usable.length === 0) return denial;
  const who = principals.map((p) => p.description).join(" and ");
  return denied(denial.code, `${denial.message}; existing credential specs with similar names that ${who} may use: ${usable.map((n) => `"${n}"`).join(", ")}`, {
    warnings: denial.warnings,
    credSpecs: denial.credSpecs,
  });
}
