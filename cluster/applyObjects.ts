import { KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject as ClientObject } from "@kubernetes/client-node";
import type { KubernetesObject } from "./manifests.js";

export const fieldManager = "gmsa-admission";

/**
 * Server-side applies objects in order, as their owner: re-applying is idempotent and a field
 * someone else changed is taken back. CRDs are waited on until established, so objects of their
 * kinds can follow in the same list.
 */
export async function applyObjects(config: KubeConfig, objects: readonly KubernetesObject[], options: { dryRun?: boolean } = {}): Promise<ClientObject[]> {
  const client = KubernetesObjectApi.makeApiClient(config);
  const applied: ClientObject[] = [];
  for (const object of objects) {
    const result = await client.patch(object as ClientObject, undefined, options.dryRun ? "All" : undefined, fieldManager, true, PatchStrategy.ServerSideApply);
    applied.push(result);
    if (object.kind === "CustomResourceDefinition" && !options.dryRun) await waitUntilEstablished(client, object.metadata.name);
  }
  return applied;
}

async function waitUntilEstablished(client: KubernetesObjectApi, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const crd = await client.read<ClientObject & { status?: { conditions?: Array<{ type: string; status: string }> } }>({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name },
    });
    if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`CustomResourceDefinition ${name} was not established within ${timeoutMs} ms`);
}
