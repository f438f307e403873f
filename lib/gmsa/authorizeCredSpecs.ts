import { canonicalJson, jsonEqual } from "./canonicalJson.js";
import { serviceAccountOf, type GmsaSetting } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { serviceAccountPrincipal, type Principal, type UseDecision } from "./ports.js";
import { resolveCredSpecs } from "./resolveCredSpecs.js";
import { lookupProblem, namesOf, shapeProblem } from "./settingChecks.js";
import { allowed, denied, type Verdict } from "./verdict.js";

/**
 * The CREATE checks of the validating webhook, for the given settings: every name is valid,
 * `use`-able by the pod's service account (and the requesting user when that is on), exists,
 * and any contents equal the named spec. Authorization is judged before existence, so nobody
 * learns which credential specs exist by naming ones they may not use.
 */
export async function authorizeCredSpecs(
  admission: PodAdmission,
  settings: readonly GmsaSetting[],
  deps: PolicyDependencies,
): Promise<Verdict> {
  const problem = shapeProblem(settings, true);
  if (problem) return problem;
  const names = namesOf(settings);
  if (names.length === 0) return allowed();

  const principals = [{ principal: serviceAccountPrincipal(admission.namespace, serviceAccountOf(admission.pod)), describe: describeServiceAccount }];
  if (deps.settings.authorizeRequestingUser) {
    const user = admission.userInfo;
    if (!user?.username) {
      return denied(403, `${settings[0]!.owner}: the request names no user to authorize for GMSACredentialSpec ${names.map((n) => `"${n}"`).join(", ")}`, { credSpecs: names });
    }
    principals.push({
      principal: { user: user.username, groups: user.groups ?? [], uid: user.uid, extra: user.extra },
      describe: (p) => `user "${p.user}"`,
    });
  }

  const [decisions, lookups] = await Promise.all([
    Promise.all(
      names.map(async (name) => {
        const answers = await Promise.all(principals.map((p) => deps.authorizer.mayUse(p.principal, admission.namespace, name, deps.signal)));
        return [name, answers] as const;
      }),
    ).then((entries) => new Map<string, readonly UseDecision[]>(entries)),
    resolveCredSpecs(deps.credSpecs, names, deps.signal),
  ]);

  for (const setting of settings) {
    const name = setting.name;
    if (name === undefined) continue;
    const refused = decisions.get(name)?.findIndex((d) => !d.allowed) ?? -1;
    if (refused >= 0) {
      const who = principals[refused]!;
      return denied(403, `${setting.owner}: ${who.describe(who.principal)} is not authorized to use GMSACredentialSpec "${name}"`, {
        credSpecs: [name],
      });
    }
    const lookup = lookups.get(name);
    const missing = lookupProblem(setting, name, lookup);
    if (missing) return missing;
    if (setting.contents !== undefined && lookup?.kind === "found") {
      const mismatch = contentsProblem(setting.contents, lookup.credspec);
      if (mismatch) return denied(422, `${setting.owner}: ${mismatch} GMSACredentialSpec "${name}"`, { credSpecs: [name] });
    }
  }
  return allowed({ credSpecs: names });
}

function describeServiceAccount(principal: Principal): string {
  const account = principal.serviceAccount!;
  return `service account "${account.name}" in namespace "${account.namespace}"`;
}

/** Cheap comparison first: contents this product inlined are byte-identical to the canonical form. */
function contentsProblem(contents: string, credspec: Readonly<Record<string, unknown>>): string | undefined {
  if (contents === canonicalJson(credspec)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(contents);
  } catch {
    return "the GMSA credential spec contents are not valid JSON, so they cannot match";
  }
  return jsonEqual(parsed, credspec) ? undefined : "the GMSA credential spec contents do not match";
}
