import type { KubeConfig } from "@kubernetes/client-node";
import { fieldManager, withKubeObjects, type KubeObjects, type StoredObject } from "./kubeObjects.js";
import type { KubernetesObject } from "./manifests.js";

export { fieldManager };

/**
 * Server-side applies objects in order, as their owner: re-applying is idempotent and a field
 * someone else changed (or an earlier version of the wiring failed to write) is taken back. CRDs
 * are waited on until established, so objects of their kinds can follow in the same list.
 */
export async function applyObjects(config: KubeConfig, objects: readonly KubernetesObject[], options: { dryRun?: boolean } = {}): Promise<StoredObject[]> {
  return withKubeObjects(config, async (client) => {
    const applied: StoredObject[] = [];
    for (const object of objects) {
      applied.push(await client.apply(object, { dryRun: options.dryRun ?? false }));
      if (object.kind === "CustomResourceDefinition" && !options.dryRun) await waitUntilEstablished(client, object.metadata.name);
    }
    return applied;
  });
}

function established(crd: StoredObject | undefined): boolean {
  const status = crd?.status;
  if (status === null || typeof status !== "object" || !("conditions" in status) || !Array.isArray(status.conditions)) return false;
  return status.conditions.some((c: unknown) => c !== null && typeof c === "object" && "type" in c && "status" in c && c.type === "Established" && c.status === "True");
}

async function waitUntilEstablished(client: KubeObjects, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (established(await client.read({ apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name } }))) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`CustomResourceDefinition ${name} was not established within ${timeoutMs} ms`);
}
