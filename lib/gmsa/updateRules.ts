import { authorizeCredSpecs, authorizeUse } from "./authorizeCredSpecs.js";
import { newEphemeralContainersUnderUnnamedContents, settingsInheritedByNewEphemeralContainers, settingsOfNewEphemeralContainers } from "./expandCredSpecs.js";
import { gmsaSettings, type GmsaSetting } from "./pod.js";
import type { PodAdmission, PolicyDependencies } from "./podAdmission.js";
import { namesOf } from "./settingChecks.js";
import { allowed, denied, type Verdict } from "../webhook/verdict.js";

/**
 * A running pod keeps the identity it was admitted with: no GMSA name or contents may change,
 * appear or disappear, at any level. Ephemeral containers added by the update are new
 * workloads in the pod and get the CREATE checks; one that names no credential spec runs under
 * the pod's, so its principals must hold `use` on that.
 */
export async function checkUpdate(admission: PodAdmission, deps: PolicyDependencies): Promise<Verdict> {
  if (!admission.oldPod) return denied(400, "an UPDATE of a pod must carry the old object");
  const before = gmsaSettings(admission.oldPod, admission.name);
  const after = gmsaSettings(admission.pod, admission.name);
  const added = settingsOfNewEphemeralContainers(after, admission.oldPod);
  const addedKeys = new Set(added.map((s) => s.key));

  // Settings are compared place by place; a place given twice (two containers of one name, which
  // the API server itself never accepts) would let one copy hide a change in the other.
  const repeated = repeatedPlace(before) ?? repeatedPlace(after);
  if (repeated) return denied(422, `${repeated.owner}: appears more than once, so its GMSA settings cannot be compared`);

  const beforeByKey = new Map(before.map((s) => [s.key, s]));
  const afterByKey = new Map(after.filter((s) => !addedKeys.has(s.key)).map((s) => [s.key, s]));
  for (const key of new Set([...beforeByKey.keys(), ...afterByKey.keys()])) {
    const before = beforeByKey.get(key);
    const after = afterByKey.get(key);
    const change = describeChange(before, after);
    if (change) {
      return denied(403, `${(after ?? before)!.owner}: GMSA settings cannot be changed on an existing pod (${change})`, {
        credSpecs: namesIn(before, after),
      });
    }
  }
  const unvouched = newEphemeralContainersUnderUnnamedContents(after, admission.pod, admission.oldPod);
  if (unvouched.length > 0) {
    return denied(
      422,
      `ephemeral container "${unvouched[0]}" of ${after[0]!.pod}: it would run under the pod's GMSA credential spec contents, which name no credential spec, so nobody's use of it can be checked; name a credential spec in the container's own windowsOptions`,
    );
  }
  const inherited = settingsInheritedByNewEphemeralContainers(after, admission.pod, admission.oldPod);
  if (added.length === 0 && inherited.length === 0) return allowed();
  const ownChecks = added.length === 0 ? allowed({ credSpecs: namesOf(inherited) }) : await authorizeCredSpecs(admission, added, deps);
  if (ownChecks.kind !== "allowed" || inherited.length === 0) return ownChecks;
  const use = await authorizeUse(admission, inherited, deps);
  return "refusal" in use ? use.refusal : ownChecks;
}

function repeatedPlace(settings: readonly GmsaSetting[]): GmsaSetting | undefined {
  const seen = new Set<string>();
  for (const setting of settings) {
    if (seen.has(setting.key)) return setting;
    seen.add(setting.key);
  }
  return undefined;
}

function describeChange(before: GmsaSetting | undefined, after: GmsaSetting | undefined): string | undefined {
  const where = (after ?? before)!.source === "annotation" ? "the alpha annotation's credential spec" : "the credential spec";
  if (before?.name !== after?.name) return `${where} name would change from ${quoted(before?.name)} to ${quoted(after?.name)}`;
  if (before?.contents !== after?.contents) {
    const how = before?.contents === undefined ? "appear" : after?.contents === undefined ? "disappear" : "change";
    const name = after?.name ?? before?.name;
    return `${where} contents${name === undefined ? "" : ` for GMSACredentialSpec "${name}"`} would ${how}`;
  }
  return undefined;
}

function quoted(name: string | undefined): string {
  return name === undefined ? "none" : `"${name}"`;
}

function namesIn(...settings: Array<GmsaSetting | undefined>): string[] {
  return [...new Set(settings.flatMap((s) => (s?.name === undefined ? [] : [s.name])))];
}
