import { isLeft } from "fp-ts/Either";
import { describeDecodeErrors } from "../decodeErrors.js";
import { expandCredSpecs } from "../gmsa/expandCredSpecs.js";
import { gmsaSettings, Pod } from "../gmsa/pod.js";
import type { PodAdmission, PolicyDependencies, RequestingUser } from "../gmsa/podAdmission.js";
import { validatePod } from "../gmsa/validatePod.js";
import type { Verdict } from "../webhook/verdict.js";

export interface Explanation {
  readonly lines: readonly string[];
  readonly admitted: boolean;
}

/**
 * What the two pod webhooks would do to a pod, by running the same policy against the cluster's
 * credential specs and access reviews, without creating anything. Validation is run on the pod
 * as given: the contents mutation adds are those of the named specs, which validation compares
 * equal, so its decision on the mutated pod is the same. Contents are never printed, only where
 * they would go.
 */
export async function explainPod(document: unknown, deps: PolicyDependencies, options: { namespace?: string; user?: RequestingUser } = {}): Promise<Explanation> {
  const decoded = Pod.decode(document);
  if (isLeft(decoded)) return { lines: [`not a Pod: ${describeDecodeErrors(decoded.left)}`], admitted: false };
  const pod = decoded.right;
  const admission: PodAdmission = {
    operation: "CREATE",
    namespace: options.namespace ?? pod.metadata?.namespace ?? "default",
    name: pod.metadata?.name || undefined,
    pod,
    ...(options.user ? { userInfo: options.user } : {}),
  };
  const settings = gmsaSettings(pod, admission.name);
  const lines: string[] = [];
  if (settings.length === 0) return { lines: ["no GMSA settings: neither webhook is called for this pod"], admitted: true };
  lines.push(
    `GMSA settings: ${settings.map((s) => `${s.owner} names ${s.name === undefined ? "no credential spec" : `"${s.name}"`}${s.contents === undefined ? "" : " and carries contents"}`).join("; ")}`,
  );

  const mutation = await expandCredSpecs(admission, deps);
  lines.push(`mutate: ${describeMutation(mutation)}`);
  const validation = await validatePod(admission, deps);
  lines.push(`validate: ${validation.kind === "allowed" ? "allowed" : `denied (${validation.code}): ${validation.message}`}`);
  for (const warning of [...mutation.warnings, ...validation.warnings]) lines.push(`warning: ${warning}`);
  const admitted = mutation.kind === "allowed" && validation.kind === "allowed";
  lines.push(admitted ? "the pod would be admitted" : "the pod would be refused");
  return { lines, admitted };
}

function describeMutation(verdict: Verdict): string {
  if (verdict.kind === "denied") return `denied (${verdict.code}): ${verdict.message}`;
  if (verdict.patch.length === 0) return "allowed, nothing to add";
  const added = verdict.patch.map((op) => (op.path === "/spec/hostname" ? "a random hostname at /spec/hostname" : `the contents at ${op.path}`));
  return `allowed, would add ${added.join(", ")}`;
}
