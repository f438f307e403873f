import type { KubeConfig } from "@kubernetes/client-node";
import { isNotFound, withKubeObjects } from "./kubeObjects.js";
import type { KubernetesObject } from "./manifests.js";

/** What applying one object would do, by field path; values are never shown (Secrets). */
export type ObjectChange =
  | { readonly object: string; readonly change: "create" }
  | { readonly object: string; readonly change: "unchanged" }
  | { readonly object: string; readonly change: "update"; readonly fields: readonly string[] };

export function objectRef(object: Pick<KubernetesObject, "kind" | "metadata">): string {
  return `${object.kind}/${object.metadata.namespace ? `${object.metadata.namespace}/` : ""}${object.metadata.name}`;
}

/** Fields the server changes on every write; they say nothing about what the wiring changes. */
const bookkeeping = new Set(["metadata.managedFields", "metadata.resourceVersion", "metadata.generation"]);

function keyPath(parent: string, key: string): string {
  const segment = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : JSON.stringify(key);
  return parent === "" ? segment : /^[A-Za-z_]/.test(segment) ? `${parent}.${segment}` : `${parent}[${segment}]`;
}

/** Paths of the leaves that differ between two JSON values. */
export function changedPaths(before: unknown, after: unknown, path = ""): string[] {
  if (bookkeeping.has(path)) return [];
  if (Array.isArray(before) && Array.isArray(after)) {
    const paths: string[] = [];
    for (let i = 0; i < Math.max(before.length, after.length); i++) paths.push(...changedPaths(before[i], after[i], `${path}[${i}]`));
    return paths;
  }
  if (before !== null && after !== null && typeof before === "object" && typeof after === "object" && !Array.isArray(before) && !Array.isArray(after)) {
    const a = before as Record<string, unknown>;
    const b = after as Record<string, unknown>;
    return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().flatMap((key) => changedPaths(a[key], b[key], keyPath(path, key)));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [path || "(whole object)"];
}

/**
 * Asks the API server what a server-side apply would make of each object (dry run: nothing is
 * written) and compares it with the live object.
 */
export async function planChanges(config: KubeConfig, objects: readonly KubernetesObject[]): Promise<ObjectChange[]> {
  return withKubeObjects(config, async (client) => {
    const changes: ObjectChange[] = [];
    for (const object of objects) {
      const ref = objectRef(object);
      const live = await client.read(object);
      if (live === undefined) {
        // Validated by the server, unless its namespace is itself still to be created.
        await client.apply(object, { dryRun: true }).catch((error: unknown) => {
          if (!isNotFound(error)) throw error;
        });
        changes.push({ object: ref, change: "create" });
        continue;
      }
      const planned = await client.apply(object, { dryRun: true });
      const fields = changedPaths(live, planned);
      changes.push(fields.length === 0 ? { object: ref, change: "unchanged" } : { object: ref, change: "update", fields });
    }
    return changes;
  });
}

export function describeChange(change: ObjectChange): string {
  if (change.change !== "update") return `${change.object}: ${change.change}`;
  const shown = change.fields.slice(0, 12);
  const more = change.fields.length > shown.length ? `, and ${change.fields.length - shown.length} more` : "";
  return `${change.object}: update ${shown.join(", ")}${more}`;
}
