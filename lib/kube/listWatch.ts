import { setTimeout as sleep } from "node:timers/promises";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { parsedFromLonger } from "../jsonSize.js";
import type { ApiServerConnection, ApiStream } from "./apiServerConnection.js";

/**
 * Keeps a copy of one resource's objects: a list (in pages) and then a watch from the list's
 * resource version, as Kubernetes clients do. A watch the server ends (its timeout) is opened again
 * from the last version seen; a version the server no longer has (410 Gone) is listed again. Any
 * other failure, of the list or of the watch, ends it and is reported: the caller decides when to
 * start again (with backoff), and a start always lists afresh.
 */

/** An object as the watch and the list carry it: what this module reads of it is its name and version. */
export type ListedObject = Readonly<Record<string, unknown>> & { readonly metadata?: { readonly name?: string; readonly resourceVersion?: string } };

const Listed = t.intersection([t.UnknownRecord, t.partial({ metadata: t.partial({ name: t.string, resourceVersion: t.string }) })]);

const ListPage = t.type({
  metadata: t.partial({ resourceVersion: t.string, continue: t.string }),
  items: t.array(Listed),
});

const WatchEvent = t.type({ type: t.string, object: Listed });

export interface ListWatchHandlers {
  /** What is held of each listed object until the list is applied, and what `page` and `replace` get. Default: the object. */
  readonly keep?: (item: ListedObject) => ListedObject;
  /** Each page as it arrives, before the list is applied: throw to refuse a list (past a bound, say). */
  readonly page?: (items: readonly ListedObject[], first: boolean) => void;
  /** A list arrived: these are all the objects now (any object not among them is gone). */
  readonly replace: (items: readonly ListedObject[]) => void;
  readonly upsert: (object: ListedObject) => void;
  readonly remove: (object: ListedObject) => void;
  /** The watch broke after start() had resolved; nothing more arrives until the next start(). */
  readonly error: (error: unknown) => void;
}

export interface ListWatchOptions {
  readonly pageSize?: number;
  /**
   * Asked of the server for each watch (`timeoutSeconds`); it ends the stream then and it is opened
   * again. A stream silent for longer than this plus 30 s is taken for a broken network (the copy
   * is then reported stale), so this also bounds how long a silent partition goes unnoticed. Default 90 s.
   */
  readonly watchTimeoutSeconds?: number;
  /** The longest a whole list, all its pages, may take. Default 2 min. */
  readonly listTimeoutMs?: number;
  /** For each list page (a watch's first answer is bounded by the connection's own timeout). Default 30 s. */
  readonly callTimeoutMs?: number;
  /**
   * The longest list page, and the longest watch event, read: a longer page ends the list with a
   * ListWatchError whose `tooLarge` is set, unread; a longer event breaks the watch. With it set, a
   * page or an event whose text parses into much less than its length (a key given twice:
   * lib/jsonSize.ts parsedFromLonger) ends the list or the watch the same way, `tooLarge` set.
   * Default: the connection's, and no such check.
   */
  readonly maxResponseBytes?: number;
}

/** The API server answered with an error status; `status` is it. */
export class ListWatchError extends Error {
  override readonly name = "ListWatchError";
  constructor(
    message: string,
    readonly status: number | undefined,
    /** A page or an event was longer than `maxResponseBytes`, or parsed into much less than its length. */
    readonly tooLarge = false,
  ) {
    super(message);
  }
}

export interface ListWatch {
  /** Lists, then opens the watch: resolves once both are done, rejects on the first failure. Stops any earlier start. */
  start(): Promise<void>;
  stop(): void;
}

const minWatchIntervalMs = 1000;

export function listWatch(connection: ApiServerConnection, path: string, handlers: ListWatchHandlers, options: ListWatchOptions = {}): ListWatch {
  const pageSize = options.pageSize ?? 100;
  const watchTimeoutSeconds = options.watchTimeoutSeconds ?? 90;
  const callTimeoutMs = options.callTimeoutMs ?? 30_000;
  const listTimeoutMs = options.listTimeoutMs ?? 120_000;
  let running: AbortController | undefined;

  async function list(signal: AbortSignal): Promise<string> {
    const items: ListedObject[] = [];
    let resourceVersion: string | undefined;
    let next: string | undefined;
    const given = new Set<string>();
    const deadline = Date.now() + listTimeoutMs;
    do {
      if (Date.now() > deadline) throw new ListWatchError(`the list of ${path} took more than ${listTimeoutMs / 1000} s`, undefined);
      const query = new URLSearchParams({ limit: String(pageSize), ...(next ? { continue: next } : {}) });
      const reply = await connection.send({
        method: "GET",
        path: `${path}?${query}`,
        signal: AbortSignal.any([signal, AbortSignal.timeout(callTimeoutMs)]),
        timeoutMs: callTimeoutMs,
        ...(options.maxResponseBytes === undefined ? {} : { maxBodyBytes: options.maxResponseBytes }),
      });
      if (reply.tooLarge && reply.status === 200) {
        throw new ListWatchError(`a page of the list of ${path} is larger than ${options.maxResponseBytes ?? "the connection's"} bytes`, undefined, true);
      }
      if (reply.status !== 200) throw new ListWatchError(`the list of ${path} was answered ${reply.status}${statusMessage(reply.body)}`, reply.status);
      const page = ListPage.decode(reply.body);
      if (isLeft(page)) throw new ListWatchError(`the list of ${path} is not a list of objects`, undefined);
      if (options.maxResponseBytes !== undefined && reply.bytes !== undefined && parsedFromLonger(reply.bytes, reply.body)) {
        throw new ListWatchError(`a page of the list of ${path} parsed into much less than its ${reply.bytes} bytes (a key given twice?)`, undefined, true);
      }
      // Every page of one list comes from the same snapshot, the first page's.
      resourceVersion ??= page.right.metadata.resourceVersion;
      const kept = handlers.keep ? page.right.items.map(handlers.keep) : page.right.items;
      items.push(...kept);
      handlers.page?.(kept, next === undefined);
      next = page.right.metadata.continue || undefined;
      // A server that hands out a token twice would page for ever.
      if (next !== undefined && given.has(next)) throw new ListWatchError(`the list of ${path} gave the same continue token twice`, undefined);
      if (next !== undefined) given.add(next);
    } while (next);
    if (resourceVersion === undefined) throw new ListWatchError(`the list of ${path} carries no resource version to watch from`, undefined);
    if (signal.aborted) throw signal.reason;
    handlers.replace(items);
    return resourceVersion;
  }

  /** The open stream, or "gone" when the version is too old to watch from. */
  async function watch(resourceVersion: string, signal: AbortSignal): Promise<ApiStream | "gone"> {
    const query = new URLSearchParams({ watch: "true", allowWatchBookmarks: "true", resourceVersion, timeoutSeconds: String(watchTimeoutSeconds) });
    // The wait for the answer is bounded by the connection's own timeout; the stream's silence by the idle bound.
    const stream = await connection.stream({
      path: `${path}?${query}`,
      signal,
      idleTimeoutMs: (watchTimeoutSeconds + 30) * 1000,
      ...(options.maxResponseBytes === undefined ? {} : { maxLineChars: options.maxResponseBytes }),
    });
    if (stream.status === 410) return "gone";
    if (stream.status !== 200) throw new ListWatchError(`the watch of ${path} was answered ${stream.status}${statusMessage(stream.body)}`, stream.status);
    return stream;
  }

  /** Reads one stream to its end: the last version seen, how many objects it brought, and whether the server had forgotten the version. */
  async function follow(stream: ApiStream, from: string): Promise<{ resourceVersion: string; events: number; gone: boolean }> {
    let resourceVersion = from;
    let events = 0;
    for await (const line of stream.lines()) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        throw new ListWatchError(`the watch of ${path} sent a line that is not JSON`, undefined);
      }
      if (options.maxResponseBytes !== undefined && parsedFromLonger(line.length, parsed)) {
        throw new ListWatchError(`the watch of ${path} sent an event that parsed into much less than its ${line.length} characters (a key given twice?)`, undefined, true);
      }
      const event = WatchEvent.decode(parsed);
      if (isLeft(event)) throw new ListWatchError(`the watch of ${path} sent an event that is not one`, undefined);
      const { type, object } = event.right;
      if (type === "ERROR") {
        const code = (object as { code?: unknown }).code;
        if (code === 410) return { resourceVersion, events, gone: true };
        throw new ListWatchError(`the watch of ${path} ended with an error${statusMessage(object)}`, typeof code === "number" ? code : undefined);
      }
      const version = object.metadata?.resourceVersion;
      if (type === "ADDED" || type === "MODIFIED") handlers.upsert(object);
      else if (type === "DELETED") handlers.remove(object);
      else if (type !== "BOOKMARK") continue;
      if (type !== "BOOKMARK") events += 1;
      if (version) resourceVersion = version;
    }
    return { resourceVersion, events, gone: false };
  }

  async function keepWatching(first: ApiStream, from: string, signal: AbortSignal): Promise<void> {
    let stream: ApiStream | "gone" = first;
    let resourceVersion = from;
    let opened = Date.now();
    // The last list was taken because the server had forgotten the version, and no watch has
    // taken a version since: a server that forgets the version of its own fresh list again is
    // failing, and its owner backs off instead of listing in a loop.
    let relisted = false;
    for (;;) {
      const ended = stream === "gone" ? { resourceVersion, events: 0, gone: true } : await follow(stream, resourceVersion);
      if (signal.aborted) return;
      // A stream that brought objects, or ran to its end, took the version it was given.
      if (ended.events > 0 || !ended.gone) relisted = false;
      if (ended.gone) {
        if (relisted) throw new ListWatchError(`the watch of ${path} refused the version its own list gave`, 410);
        resourceVersion = await list(signal);
        relisted = true;
      } else resourceVersion = ended.resourceVersion;
      // Whatever the stream carried, watches are not opened more than once a second.
      const since = Date.now() - opened;
      if (since < minWatchIntervalMs) await sleep(minWatchIntervalMs - since, undefined, { signal });
      opened = Date.now();
      stream = await watch(resourceVersion, signal);
    }
  }

  return {
    async start() {
      running?.abort(new Error("started again"));
      const controller = new AbortController();
      running = controller;
      let resourceVersion = await list(controller.signal);
      let stream = await watch(resourceVersion, controller.signal);
      if (stream === "gone") {
        resourceVersion = await list(controller.signal);
        stream = await watch(resourceVersion, controller.signal);
        if (stream === "gone") throw new ListWatchError(`the watch of ${path} refused the version its own list gave`, 410);
      }
      const opened = stream;
      void keepWatching(opened, resourceVersion, controller.signal).catch((error: unknown) => {
        if (controller.signal.aborted) return;
        controller.abort(error);
        handlers.error(error);
      });
    },
    stop() {
      running?.abort(new Error("stopped"));
      running = undefined;
    },
  };
}

function statusMessage(body: unknown): string {
  const message = typeof body === "object" && body !== null ? (body as { message?: unknown }).message : undefined;
  return typeof message === "string" && message !== "" ? `: ${message.slice(0, 200)}` : "";
}
