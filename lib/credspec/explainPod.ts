import { isLeft } from "fp-ts/Either";
import { describeDecodeErrors } from "../decodeErrors.js";
import { expandCredSpecs } from "../gmsa/expandCredSpecs.js";
import { gmsaSettings, Pod } from "../gmsa/pod.js";
import type { PodAdmission, PolicyDependencies, RequestingUser } from "../gmsa/podAdmission.js";
import { validatePod } from "../gmsa/validatePod.js";
import type { Verdict } from "../webhook/verdict.js";
import { isJsonObject as isRecord } from "../jsonObject.js";

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
  const workload = podOfWorkload(document);
  if ("problem" in workload) return { lines: [workload.problem], admitted: false };
  const decoded = Pod.decode(workload.pod);
  if (isLeft(decoded)) return { lines: [`not a Pod${workload.from ? ` template (${workload.from})` : ""}: ${describeDecodeErrors(decoded.left)}`], admitted: false };
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
  if (workload.from) {
    lines.push(`${workload.from}: its pods run in namespace "${admission.namespace}" as service account "${pod.spec?.serviceAccountName || "default"}"`);
  }
  if (settings.length === 0) return { lines: [...lines, "no GMSA settings: neither webhook is called for this pod"], admitted: true };
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

/** Where each workload kind keeps the template of its pods. */
const templatePaths: Readonly<Record<string, readonly string[]>> = {
  Deployment: ["spec", "template"],
  StatefulSet: ["spec", "template"],
  DaemonSet: ["spec", "template"],
  ReplicaSet: ["spec", "template"],
  ReplicationController: ["spec", "template"],
  Job: ["spec", "template"],
  CronJob: ["spec", "jobTemplate", "spec", "template"],
};

/**
 * A Pod as given, or the pod a workload would create from its template: in the workload's
 * namespace, with a name the controller generates, and the template's labels and spec (its
 * service account included).
 */
function podOfWorkload(document: unknown): { pod: unknown; from?: string } | { problem: string } {
  if (!isRecord(document)) return { problem: "not a Pod or a workload: the document is not an object" };
  const kind = typeof document.kind === "string" ? document.kind : "";
  if (kind === "Pod" || kind === "") return { pod: document };
  const path = templatePaths[kind];
  if (!path) return { problem: `a ${kind} has no pods to explain: give a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job or CronJob` };
  let template: unknown = document;
  for (const key of path) template = isRecord(template) ? template[key] : undefined;
  const name = isRecord(document.metadata) && typeof document.metadata.name === "string" ? document.metadata.name : "";
  const from = `${kind} "${name}"`;
  if (!isRecord(template)) return { problem: `${from} has no pod template at ${path.join(".")}` };
  // The template's own name and namespace are ignored by the controller, and so here: its pods run
  // in the workload's namespace (or the one --namespace or the kubeconfig gives).
  const { namespace: _ignored, name: _unused, ...metadata } = isRecord(template.metadata) ? template.metadata : {};
  const namespace = isRecord(document.metadata) ? document.metadata.namespace : undefined;
  return {
    pod: {
      apiVersion: "v1",
      kind: "Pod",
      // Named by the controller when it creates the pod, as the webhook sees it: no name yet.
      metadata: { ...metadata, ...(name ? { generateName: `${name}-` } : {}), ...(typeof namespace === "string" ? { namespace } : {}) },
      spec: template.spec,
    },
    from,
  };
}

function describeMutation(verdict: Verdict): string {
  if (verdict.kind === "denied") return `denied (${verdict.code}): ${verdict.message}`;
  if (verdict.patch.length === 0) return "allowed, nothing to add";
  const added = verdict.patch.map((op) => (op.path === "/spec/hostname" ? "a random hostname at /spec/hostname" : `the contents at ${op.path}`));
  return `allowed, would add ${added.join(", ")}`;
}
