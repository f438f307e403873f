import type { KubeConfig } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { isConflict, withKubeObjects } from "./kubeObjects.js";
import type { KubernetesObject } from "./manifests.js";

/**
 * Whether the relay's namespace is the wiring's own. `--uninstall` deletes the relay's namespace
 * with everything in it, so the wiring must never take over
 * a namespace that holds anything else. The proof of ownership is an annotation written only when
 * the wiring creates the namespace (a create, which fails on an existing one) — never by an
 * apply, so wiring cannot grant it to itself on someone else's namespace.
 */
export const createdByWiringAnnotation = "gmsa-admission.windows.k8s.io/created-by";
export const createdByWiringValue = "wire";
/** The create is its own writer, apart from the applies, so no apply ever owns the annotation. */
const creatingFieldManager = "gmsa-admission-create";

export type NamespaceOwnership = "absent" | "ours" | "foreign";

const LiveNamespace = t.type({
  metadata: t.partial({ annotations: t.union([t.record(t.string, t.string), t.null]) }),
});

export function namespaceOwnership(live: unknown): NamespaceOwnership {
  if (live === undefined) return "absent";
  const decoded = LiveNamespace.decode(live);
  if (isLeft(decoded)) return "foreign";
  return decoded.right.metadata.annotations?.[createdByWiringAnnotation] === createdByWiringValue ? "ours" : "foreign";
}

export async function readNamespaceOwnership(config: KubeConfig, namespace: string): Promise<NamespaceOwnership> {
  return withKubeObjects(config, async (client) => namespaceOwnership(await client.read({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } })));
}

export class ForeignNamespaceError extends Error {
  constructor(namespace: string) {
    super(
      `namespace ${namespace} exists and was not created by the wiring: the relay needs a namespace of its own ` +
        `(--uninstall deletes it with everything in it). ` +
        `Choose a --namespace that does not exist yet; a namespace that holds only a relay installed before the wiring recorded creation can be claimed with --adopt-namespace`,
    );
    this.name = "ForeignNamespaceError";
  }
}

/**
 * Creates the namespace, marked as the wiring's, unless it already exists. One that exists must
 * carry the mark; `adopt` writes it on one the operator declares to be the relay's alone.
 */
export async function ensureOwnNamespace(config: KubeConfig, namespace: KubernetesObject, options: { adopt: boolean }): Promise<"created" | "ours" | "adopted"> {
  const marked = { ...namespace, metadata: { ...namespace.metadata, annotations: { [createdByWiringAnnotation]: createdByWiringValue } } };
  const created = await withKubeObjects(config, async (client) => {
    try {
      await client.create(marked, { fieldManager: creatingFieldManager });
      return true;
    } catch (error) {
      if (!isConflict(error)) throw error;
      return false;
    }
  });
  if (created) return "created";
  const ownership = await readNamespaceOwnership(config, namespace.metadata.name);
  if (ownership === "ours") return "ours";
  if (!options.adopt) throw new ForeignNamespaceError(namespace.metadata.name);
  await withKubeObjects(config, (client) =>
    client.mergePatch(
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace.metadata.name } },
      { metadata: { annotations: { [createdByWiringAnnotation]: createdByWiringValue } } },
      { fieldManager: creatingFieldManager },
    ),
  );
  return "adopted";
}
