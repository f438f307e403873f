import type { KubeConfig } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { apiServerConnection, type ApiReply, type ApiServerConnection } from "../lib/kube/apiServerConnection.js";
import type { KubernetesObject } from "./manifests.js";
import { productFieldManager as fieldManager } from "../lib/wiring/asRendered.js";

export { fieldManager };

/**
 * The wiring's, the credential spec tool's and the local host's reads and writes of Kubernetes
 * objects, in wire JSON: a manifest is server-side applied exactly as rendered and an object is
 * read back exactly as stored (see lib/kube/apiServerConnection.ts for why client-node's typed
 * clients are not used for this).
 */

export type ObjectRef = Pick<KubernetesObject, "apiVersion" | "kind"> & { readonly metadata: { readonly name: string; readonly namespace?: string | undefined } };

const StoredObjectCodec = t.type({
  apiVersion: t.string,
  kind: t.string,
  metadata: t.intersection([
    t.type({ name: t.string }),
    t.partial({
      namespace: t.string,
      uid: t.string,
      resourceVersion: t.string,
      annotations: t.record(t.string, t.string),
      labels: t.record(t.string, t.string),
      managedFields: t.array(t.partial({ manager: t.string, operation: t.string })),
    }),
  ]),
});
/** An object as the API server stores it: the fields decoded here, and every other field as sent. */
export type StoredObject = t.TypeOf<typeof StoredObjectCodec> & Record<string, unknown>;

const StatusCodec = t.partial({ message: t.string, reason: t.string });

const ListCodec = t.type({ items: t.array(t.unknown), metadata: t.partial({ continue: t.string }) });

const ResourceListCodec = t.type({ resources: t.array(t.type({ name: t.string, kind: t.string, namespaced: t.boolean })) });

/** The API server refused a call; `code` is its HTTP status, `message` its Status message. */
export class KubeApiError extends Error {
  override readonly name = "KubeApiError";
  constructor(
    readonly code: number,
    readonly reason: string | undefined,
    readonly call: string,
    message: string,
  ) {
    super(message);
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof KubeApiError && error.code === 404;
}

export function isConflict(error: unknown): boolean {
  return error instanceof KubeApiError && error.code === 409;
}

export interface KubeObjects {
  readonly server: string;
  /** Server-side apply as `fieldManager`, taking over fields others changed; dry-run asks what it would store. */
  apply(object: KubernetesObject, options?: { readonly dryRun?: boolean; readonly fieldManager?: string }): Promise<StoredObject>;
  /** Creates the object; a KubeApiError with code 409 when it exists. */
  create(object: KubernetesObject, options: { readonly fieldManager: string }): Promise<StoredObject>;
  /** A JSON merge patch (RFC 7386) of an existing object. */
  mergePatch(ref: ObjectRef, patch: Record<string, unknown>, options: { readonly fieldManager: string }): Promise<StoredObject>;
  /** The stored object, or undefined when there is none. */
  read(ref: ObjectRef): Promise<StoredObject | undefined>;
  /** Every object of a kind, in one namespace or (none given) in all of them, page by page. */
  list(apiVersion: string, kind: string, namespace?: string, options?: { readonly labelSelector?: string }): Promise<StoredObject[]>;
  /**
   * Deletes the object (dependents in the background); "absent" when there was none. With
   * `unchangedSince` (the uid and resourceVersion of a read), only the object as read: a KubeApiError
   * with code 409 when it was changed since.
   */
  remove(
    ref: ObjectRef,
    options?: { readonly dryRun?: boolean; readonly unchangedSince?: { readonly uid: string; readonly resourceVersion: string } },
  ): Promise<"deleted" | "absent">;
  close(): Promise<void>;
}

interface Resource {
  readonly plural: string;
  readonly namespaced: boolean;
}

function groupPath(apiVersion: string): string {
  return apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

function query(parameters: Record<string, string | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(parameters)) if (value !== undefined) search.set(key, value);
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

function describe(ref: ObjectRef): string {
  return `${ref.kind} ${ref.metadata.namespace ? `${ref.metadata.namespace}/` : ""}${ref.metadata.name}`;
}

export function kubeObjects(config: KubeConfig, options: { timeoutMs?: number } = {}): KubeObjects {
  const connection: ApiServerConnection = apiServerConnection(config, options);
  const discovered = new Map<string, Promise<Map<string, Resource>>>();

  async function failed(what: string, reply: ApiReply): Promise<never> {
    const status = StatusCodec.decode(reply.body);
    const message = !isLeft(status) && status.right.message !== undefined ? status.right.message : typeof reply.body === "string" ? reply.body.slice(0, 500) : "no message";
    throw new KubeApiError(reply.status, isLeft(status) ? undefined : status.right.reason, what, `${what}: the API server answered ${reply.status}: ${message}`);
  }

  function stored(what: string, reply: ApiReply): StoredObject {
    const decoded = StoredObjectCodec.decode(reply.body);
    if (isLeft(decoded)) throw new Error(`${what}: the API server answered ${reply.status} with something that is not a Kubernetes object`);
    return reply.body as StoredObject;
  }

  async function discover(apiVersion: string): Promise<Map<string, Resource>> {
    const reply = await connection.send({ method: "GET", path: groupPath(apiVersion) });
    if (reply.status !== 200) return failed(`discovering ${apiVersion}`, reply);
    const decoded = ResourceListCodec.decode(reply.body);
    if (isLeft(decoded)) throw new Error(`discovering ${apiVersion}: the API server's answer is not a resource list`);
    const byKind = new Map<string, Resource>();
    // Subresources (pods/status) share their parent's kind; the plain resource is the one addressed.
    for (const resource of decoded.right.resources) if (!resource.name.includes("/")) byKind.set(resource.kind, { plural: resource.name, namespaced: resource.namespaced });
    return byKind;
  }

  async function resourceOf(apiVersion: string, kind: string): Promise<Resource> {
    for (let attempt = 0; attempt < 2; attempt++) {
      let known = discovered.get(apiVersion);
      if (known === undefined) {
        known = discover(apiVersion);
        discovered.set(apiVersion, known);
        known.catch(() => discovered.delete(apiVersion));
      }
      const resource = (await known.catch((error: unknown) => (isNotFound(error) ? new Map<string, Resource>() : Promise.reject(error)))).get(kind);
      if (resource !== undefined) return resource;
      // A kind its CRD made a moment ago: ask once more.
      discovered.delete(apiVersion);
    }
    throw new KubeApiError(404, "NotFound", `resolving ${kind}`, `the API server serves no kind ${kind} in ${apiVersion}`);
  }

  /** Namespaced kinds: one namespace's collection, or every namespace's when `allNamespaces` is asked for. */
  async function collectionPath(apiVersion: string, kind: string, namespace: string | undefined, allNamespaces = false): Promise<string> {
    const resource = await resourceOf(apiVersion, kind);
    const named = namespace !== undefined && namespace !== "";
    if (resource.namespaced && !named && !allNamespaces) throw new Error(`${kind} is namespaced: a namespace is needed`);
    const scope = resource.namespaced && named ? `/namespaces/${encodeURIComponent(namespace)}` : "";
    return `${groupPath(apiVersion)}${scope}/${resource.plural}`;
  }

  async function objectPath(ref: ObjectRef): Promise<string> {
    return `${await collectionPath(ref.apiVersion, ref.kind, ref.metadata.namespace)}/${encodeURIComponent(ref.metadata.name)}`;
  }

  return {
    server: connection.server,
    async apply(object, applyOptions = {}) {
      const what = `applying ${describe(object)}`;
      const path = `${await objectPath(object)}${query({ fieldManager: applyOptions.fieldManager ?? fieldManager, force: "true", dryRun: applyOptions.dryRun ? "All" : undefined })}`;
      // JSON is YAML: the apply body is the manifest's JSON, every field under its wire name.
      const reply = await connection.send({ method: "PATCH", path, body: object, contentType: "application/apply-patch+yaml" });
      if (reply.status !== 200 && reply.status !== 201) return failed(what, reply);
      return stored(what, reply);
    },
    async create(object, createOptions) {
      const what = `creating ${describe(object)}`;
      const path = `${await collectionPath(object.apiVersion, object.kind, object.metadata.namespace)}${query({ fieldManager: createOptions.fieldManager })}`;
      const reply = await connection.send({ method: "POST", path, body: object });
      if (reply.status !== 201 && reply.status !== 200) return failed(what, reply);
      return stored(what, reply);
    },
    async mergePatch(ref, patch, patchOptions) {
      const what = `patching ${describe(ref)}`;
      const path = `${await objectPath(ref)}${query({ fieldManager: patchOptions.fieldManager })}`;
      const reply = await connection.send({ method: "PATCH", path, body: patch, contentType: "application/merge-patch+json" });
      if (reply.status !== 200) return failed(what, reply);
      return stored(what, reply);
    },
    async read(ref) {
      const what = `reading ${describe(ref)}`;
      let path: string;
      try {
        path = await objectPath(ref);
      } catch (error) {
        // No such kind served (a CRD not installed): no such object either.
        if (isNotFound(error)) return undefined;
        throw error;
      }
      const reply = await connection.send({ method: "GET", path });
      if (reply.status === 404) return undefined;
      if (reply.status !== 200) return failed(what, reply);
      return stored(what, reply);
    },
    async list(apiVersion, kind, namespace, listOptions = {}) {
      const what = `listing ${kind}${namespace ? ` in ${namespace}` : ""}`;
      const base = await collectionPath(apiVersion, kind, namespace, true);
      const items: StoredObject[] = [];
      let next: string | undefined;
      do {
        const reply = await connection.send({ method: "GET", path: `${base}${query({ labelSelector: listOptions.labelSelector, limit: "500", continue: next })}` });
        if (reply.status !== 200) return failed(what, reply);
        const page = ListCodec.decode(reply.body);
        if (isLeft(page)) throw new Error(`${what}: the API server's answer is not a list`);
        for (const item of page.right.items) {
          // A list's items carry no apiVersion or kind of their own.
          const withKind: unknown = item !== null && typeof item === "object" ? { apiVersion, kind, ...item } : item;
          if (isLeft(StoredObjectCodec.decode(withKind))) throw new Error(`${what}: an item is not a Kubernetes object`);
          items.push(withKind as StoredObject);
        }
        next = page.right.metadata.continue || undefined;
      } while (next !== undefined);
      return items;
    },
    async remove(ref, removeOptions = {}) {
      const what = `deleting ${describe(ref)}`;
      const path = `${await objectPath(ref)}${query({ propagationPolicy: "Background", dryRun: removeOptions.dryRun ? "All" : undefined })}`;
      const since = removeOptions.unchangedSince;
      const reply = await connection.send({
        method: "DELETE",
        path,
        ...(since ? { body: { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid: since.uid, resourceVersion: since.resourceVersion } } } : {}),
      });
      if (reply.status === 404) return "absent";
      if (reply.status !== 200 && reply.status !== 202) return failed(what, reply);
      return "deleted";
    },
    close: () => connection.close(),
  };
}

/** Runs `work` with a client for the kubeconfig's cluster, closing its connections after. */
export async function withKubeObjects<T>(config: KubeConfig, work: (objects: KubeObjects) => Promise<T>): Promise<T> {
  const objects = kubeObjects(config);
  try {
    return await work(objects);
  } finally {
    await objects.close();
  }
}
