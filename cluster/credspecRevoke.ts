import { parseArgs } from "node:util";
import { grantUse } from "../lib/credspec/grantUse.js";
import { jsonEqual } from "../lib/gmsa/canonicalJson.js";
import { credSpecNameProblem } from "../lib/gmsa/credSpecName.js";
import { UsageError, type CredspecIo } from "./credspecInput.js";
import { isConflict, withKubeObjects, type KubeObjects, type StoredObject } from "./kubeObjects.js";
import type { KubernetesObject } from "./manifests.js";
import { exitCodes } from "./wire.js";

/**
 * `revoke NAME --service-account NS/NAME [--cluster-wide] [--apply]`: removes what `grant` with the
 * same arguments created, and nothing else. The binding goes when it is still exactly as grant made
 * it (its labels, role and single subject); the Role or ClusterRole goes when it is still as grant
 * made it and no other binding refers to it. Anything changed by hand, or still in use, is kept,
 * and the output says why. Without --apply it says what it would do.
 */
export async function revoke(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { "service-account": { type: "string" }, "cluster-wide": { type: "boolean", default: false }, apply: { type: "boolean", default: false } },
  });
  if (positionals.length !== 1) throw new UsageError("revoke takes one credential spec name");
  const credSpec = positionals[0]!;
  const nameProblem = credSpecNameProblem(credSpec);
  if (nameProblem) throw new UsageError(`"${credSpec}" is not a valid GMSACredentialSpec name: ${nameProblem}`);
  const account = values["service-account"];
  const match = account === undefined ? null : /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(account);
  if (!match || account!.length > 253 + 64) throw new UsageError("revoke needs --service-account NAMESPACE/NAME (both lower-case DNS names)");
  const [role, binding] = grantUse({ credSpec, namespace: match[1]!, serviceAccount: match[3]!, clusterWide: values["cluster-wide"] === true }) as unknown as [
    KubernetesObject,
    KubernetesObject,
  ];
  const apply = values.apply === true;
  return withKubeObjects(io.kubeConfig(), async (client) => {
    const lines: string[] = [];
    const bindingGone = await removeIfAsGranted(client, binding, apply, lines, async () => undefined);
    await removeIfAsGranted(client, role, apply, lines, async () => {
      const users = await bindingsOf(client, role);
      // The binding this revoke removes (or would remove) no longer counts.
      const others = users.filter(
        (user) => !(bindingGone && user.kind === binding.kind && user.metadata.name === binding.metadata.name && user.metadata.namespace === binding.metadata.namespace),
      );
      return others.length === 0 ? undefined : `still bound by ${others.map(describe).join(", ")}`;
    });
    for (const line of lines) io.stdout(`${line}\n`);
    if (!apply) io.stdout("nothing was changed: add --apply to delete\n");
    return exitCodes.ok;
  });
}

function describe(object: KubernetesObject | StoredObject): string {
  return `${object.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ""}${object.metadata.name}`;
}

/** The fields grant sets, compared with what is stored: labels grant put there, the rules or the role and subjects. */
function asGranted(stored: StoredObject, granted: KubernetesObject): string | undefined {
  const labels = (granted.metadata as { labels?: Record<string, string> }).labels ?? {};
  for (const [key, value] of Object.entries(labels)) {
    if (stored.metadata.labels?.[key] !== value) return `it lacks the label ${key}=${value} grant sets: not made by grant`;
  }
  for (const field of ["rules", "roleRef", "subjects"] as const) {
    if (field in granted && !jsonEqual(stored[field], (granted as Record<string, unknown>)[field])) return `its ${field} were changed since grant made it`;
  }
  return undefined;
}

async function removeIfAsGranted(client: KubeObjects, granted: KubernetesObject, apply: boolean, lines: string[], stillUsed: () => Promise<string | undefined>): Promise<boolean> {
  const ref = {
    apiVersion: granted.apiVersion,
    kind: granted.kind,
    metadata: { name: granted.metadata.name, ...(granted.metadata.namespace ? { namespace: granted.metadata.namespace } : {}) },
  };
  const stored = await client.read(ref);
  if (!stored) {
    lines.push(`absent ${describe(granted)}`);
    return true;
  }
  const changed = asGranted(stored, granted);
  if (changed) {
    lines.push(`kept ${describe(granted)}: ${changed}`);
    return false;
  }
  const used = await stillUsed();
  if (used) {
    lines.push(`kept ${describe(granted)}: ${used}`);
    return false;
  }
  if (apply) {
    const { uid, resourceVersion } = stored.metadata;
    const unchangedSince = uid !== undefined && resourceVersion !== undefined ? { uid, resourceVersion } : undefined;
    try {
      // Only the object as it was read and compared: one changed meanwhile is kept.
      await client.remove(ref, unchangedSince ? { unchangedSince } : {});
    } catch (error) {
      if (!isConflict(error)) throw error;
      lines.push(`kept ${describe(granted)}: it was changed while revoke ran`);
      return false;
    }
  }
  lines.push(`${apply ? "deleted" : "would delete"} ${describe(granted)}`);
  return true;
}

/** The RoleBindings (and, for a ClusterRole, ClusterRoleBindings) that refer to the role. */
async function bindingsOf(client: KubeObjects, role: KubernetesObject): Promise<StoredObject[]> {
  const rbac = "rbac.authorization.k8s.io/v1";
  const refersTo = (binding: StoredObject) => {
    const ref = binding.roleRef as { kind?: unknown; name?: unknown } | undefined;
    return ref?.kind === role.kind && ref.name === role.metadata.name;
  };
  if (role.kind === "Role") return (await client.list(rbac, "RoleBinding", role.metadata.namespace)).filter(refersTo);
  const [roleBindings, clusterRoleBindings] = await Promise.all([client.list(rbac, "RoleBinding"), client.list(rbac, "ClusterRoleBinding")]);
  return [...roleBindings, ...clusterRoleBindings].filter(refersTo);
}
