import { notFoundMemory } from "../caching/notFoundMemory.js";
import { type CredSpecLookup, type CredSpecSource, type PortCall } from "../gmsa/ports.js";
import { heldBytes } from "../jsonSize.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";
import type { CacheStateEvent } from "../observability/cacheEvents.js";
import { instanceCounters } from "../observability/instanceCounters.js";
import { countRequest } from "../observability/requestCounters.js";
import type { ApiServerConnection } from "./apiServerConnection.js";
import { credSpecPath, lookupFromObject } from "./credSpecApi.js";
import { listWatch, ListWatchError, type ListWatch, type ListedObject } from "./listWatch.js";

/**
 * Every GMSACredentialSpec of the cluster, kept in memory by one list+watch per instance and
 * shared by all its admissions. Started by the first lookup, once that lookup's own read has
 * been answered; until the first list has arrived, lookups go straight to the API server, so a
 * cold start never waits for a full list, nor shares its connection and CPU with one. A name
 * the cache does not know is confirmed with one GET before it is called unknown: a spec created
 * a moment ago must not be refused. A name the API server does not have either is remembered for
 * a few seconds (a pod naming many unknown names costs one GET per name, not one per lookup) and
 * forgotten the moment the watch brings a spec of that name. When the watch breaks, the cache
 * keeps answering with what it knows when the API server cannot answer, says it is stale, and
 * reconnects with backoff.
 *
 * What one cluster keeps here is bounded, by count and by the memory the specs take as parsed
 * (heldBytes, not their JSON's length: parsed, empty objects and arrays take 20 times theirs):
 * the memory is the instance's, shared by every member. The list is read in pages of at most
 * `maxListPageBytes`, so a cluster past a bound is refused once it has sent a page more than the
 * bound, not its whole list. Past a bound, or on a larger page, the cache stops for good (watch
 * closed, specs dropped), says so in a warning and in its status, and lookups become the direct
 * GETs with not-found memory of an uncached client: admissions stay correct and cost one API
 * call more each. A spec larger than admission reads (lib/gmsa/credSpecSize.ts) is kept only as
 * that, and answered `tooLarge`.
 */
export interface CredSpecCacheStatus {
  readonly started: boolean;
  readonly synced: boolean;
  readonly stale: boolean;
  readonly size: number;
  /** Names remembered as not found. */
  readonly notFound: number;
  /** The cluster has more specs, or larger ones, than the cache may hold: it stopped and lookups go to the API server. */
  readonly overflow: boolean;
}

export interface CredSpecCache extends CredSpecSource {
  status(): CredSpecCacheStatus;
  stop(): Promise<void>;
}

export interface CredSpecCacheOptions {
  /** Reads one spec from the API server: the cold-start path and the confirmation of a miss. */
  readonly direct: CredSpecSource;
  readonly log: (level: "info" | "warn", message: string) => void;
  /** Each change of state, for a structured line (lib/observability/cacheEvents.ts); without it, `log` says it in words. */
  readonly onState?: (event: CacheStateEvent) => void;
  /** Answers served stale are reported at most this often, as one count. Default 60 s. */
  readonly staleReportMs?: number;
  /** The watch was refused with 401: credentials to renew before reconnecting. */
  readonly onUnauthorized?: () => void;
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** How long "not found" is believed while the watch is up (it clears a name when the spec appears). Default 5 s. */
  readonly notFoundTtlMs?: number;
  /** The same before the first list and while the watch is broken, when nothing clears it. Default 1 s. */
  readonly unwatchedNotFoundTtlMs?: number;
  readonly maxNotFound?: number;
  /** The most specs held; more stop the cache. Default: no bound. */
  readonly maxSpecs?: number;
  /** The most bytes held, counted as the specs take memory once parsed (heldBytes); more stop the cache. Default: no bound. */
  readonly maxBytes?: number;
  /** Specs asked for per list request. Default 100. */
  readonly pageSize?: number;
  readonly now?: () => number;
}

/**
 * The longest list page read, and the longest watch event: a page of 100 specs takes well under
 * 1 MiB, and one object as large as the API server stores (about 1.5 MiB) fits. What a page
 * parses into is held until it is counted, so this bounds what a cluster can make an instance
 * hold before a bound refuses it. A longer page stops the cache.
 */
export const maxListPageBytes = 4 * 1024 * 1024;

/** The cluster holds more than the cache may: not a failure to retry. */
class CredSpecCacheOverflow extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredSpecCacheOverflow";
  }
}

export function credSpecCache(connection: ApiServerConnection, options: CredSpecCacheOptions): CredSpecCache {
  const minBackoff = options.minBackoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const entries = new Map<string, CredSpecLookup>();
  const notFound = notFoundMemory({ ...(options.maxNotFound !== undefined ? { maxEntries: options.maxNotFound } : {}), ...(options.now ? { now: options.now } : {}) });
  const notFoundTtl = () => (synced && !stale ? (options.notFoundTtlMs ?? 5_000) : (options.unwatchedNotFoundTtlMs ?? 1_000));
  let watcher: ListWatch | undefined;
  // The first lookup has asked for the start; it happens once its read is answered.
  let starting = false;
  let synced = false;
  let stale = false;
  let stopped = false;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;
  const maxSpecs = options.maxSpecs ?? Number.POSITIVE_INFINITY;
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  const pageSize = options.pageSize ?? 100;
  // Name -> its size as JSON, and their sum: kept on the watch path only, never on a lookup.
  const sizes = new Map<string, number>();
  let bytes = 0;
  let overflow = false;
  const now = options.now ?? Date.now;
  const report = (event: CacheStateEvent) =>
    options.onState
      ? options.onState(event)
      : options.log(event.state === "synced" || event.state === "resynced" ? "info" : "warn", `credential spec cache ${event.state}: ${event.reason}`);
  // Lookups answered from a stale cache, counted and reported at most every staleReportMs.
  let staleServed = 0;
  let staleReportedAt = Number.NEGATIVE_INFINITY;
  const servedStale = () => {
    staleServed += 1;
    if (now() - staleReportedAt < (options.staleReportMs ?? 60_000)) return;
    staleReportedAt = now();
    report({ state: "staleServed", specs: staleServed, reason: "the API server could not be asked; answered with the specs known before the watch broke" });
    staleServed = 0;
  };

  const beyondBounds = (count: number, held: number): string | undefined =>
    count > maxSpecs
      ? `the cluster has more than ${maxSpecs} credential specs`
      : held > maxBytes
        ? `the cluster's credential specs take more than ${maxBytes} bytes of memory`
        : undefined;

  function overflowed(reason: string): void {
    if (overflow || stopped) return;
    overflow = true;
    clearTimeout(retry);
    clearTimeout(settled);
    const watching = watcher;
    watcher = undefined;
    watching?.stop();
    entries.clear();
    storedAt.clear();
    sizes.clear();
    bytes = 0;
    synced = false;
    stale = false;
    report({ state: "stopped", specs: 0, reason: `${reason}; every lookup now reads the API server` });
  }

  // What is kept of a spec, and what that takes: its name, its entry, and the contents admission
  // reads (a copy), judged on the whole object as a GET would judge it.
  const keptOf = (object: ListedObject): { readonly lookup: CredSpecLookup; readonly size: number } => {
    const lookup = lookupFromObject(object);
    return { lookup, size: heldBytes(object.metadata?.name ?? "") + 64 + (lookup.kind === "found" ? heldBytes(lookup.credspec) : 0) };
  };
  // What a list holds of each spec until it is applied: its name and version, and what is kept.
  const listedKept = new WeakMap<object, ReturnType<typeof keptOf>>();
  const keepListed = (item: ListedObject): ListedObject => {
    const listed = {
      metadata: {
        ...(item.metadata?.name === undefined ? {} : { name: item.metadata.name }),
        ...(item.metadata?.resourceVersion === undefined ? {} : { resourceVersion: item.metadata.resourceVersion }),
      },
    };
    listedKept.set(listed, keptOf(item));
    return listed;
  };

  // When each name was last stored, on a clock of stores: a lookup believes the cache over the
  // API server's "not found" only for a spec stored after its GET was sent.
  const storedAt = new Map<string, number>();
  let stores = 0;
  const remember = (object: ListedObject) => {
    const name = object.metadata?.name;
    if (!name || overflow) return;
    storedAt.set(name, ++stores);
    // Only what admission reads of it is held: of a spec larger than it reads, that it is.
    const { lookup, size } = listedKept.get(object) ?? keptOf(object);
    bytes += size - (sizes.get(name) ?? 0);
    sizes.set(name, size);
    entries.set(name, lookup);
    notFound.forget(name);
    const beyond = beyondBounds(entries.size, bytes);
    if (beyond) overflowed(beyond);
  };
  const forget = (object: ListedObject) => {
    const name = object.metadata?.name;
    if (!name) return;
    entries.delete(name);
    storedAt.delete(name);
    bytes -= sizes.get(name) ?? 0;
    sizes.delete(name);
  };

  let attempt = 0;
  let failedAttempt = -1;
  let settled: NodeJS.Timeout | undefined;

  function start(): void {
    // Counted page by page as the list arrives: a cluster past a bound is refused a page past it.
    let listed = 0;
    let listedBytes = 0;
    watcher = listWatch(
      connection,
      credSpecPath,
      {
        keep: keepListed,
        page: (items, first) => {
          if (first) [listed, listedBytes] = [0, 0];
          listed += items.length;
          // What the list holds until its last page: counted as it will be kept.
          for (const item of items) listedBytes += listedKept.get(item)?.size ?? 0;
          const beyond = beyondBounds(listed, listedBytes);
          if (beyond) throw new CredSpecCacheOverflow(beyond);
        },
        replace: (items) => {
          // What is gone is forgotten first: the bounds are checked against the new list, not
          // the old and the new together (every spec renamed would otherwise count twice).
          const present = new Set<string>();
          for (const item of items) if (item.metadata?.name) present.add(item.metadata.name);
          for (const name of [...entries.keys()]) if (!present.has(name)) forget({ metadata: { name } });
          for (const item of items) remember(item);
        },
        upsert: remember,
        remove: forget,
        error: failed,
      },
      { pageSize, maxResponseBytes: maxListPageBytes },
    );
    connect();
  }

  function failed(error: unknown): void {
    if (error instanceof CredSpecCacheOverflow) return overflowed(error.message);
    if (error instanceof ListWatchError && error.tooLarge) return overflowed(`${error.message}, more than a list page of credential specs takes`);
    instanceCounters.watchErrors += 1;
    // Remember which attempt failed, so that it is not taken for a sync.
    failedAttempt = attempt;
    clearTimeout(settled);
    if (stopped || overflow) return;
    stale = synced;
    failures += 1;
    if (error instanceof ListWatchError && error.status === 401) options.onUnauthorized?.();
    const delay = Math.min(maxBackoff, minBackoff * 2 ** Math.min(failures - 1, 16)) * (0.5 + Math.random() / 2);
    report({
      state: "watchFailed",
      specs: entries.size,
      reason: `the watch failed (${describe(error)}); ${synced ? "serving the last known specs, " : ""}reconnecting in ${Math.round(delay)} ms`,
    });
    retry = setTimeout(connect, delay);
    retry.unref();
  }

  function connect(): void {
    if (stopped || !watcher) return;
    if (failures > 0) instanceCounters.watchRestarts += 1;
    const current = ++attempt;
    const watching = watcher;
    watching.start().then(
      () => {
        if (stopped || overflow) return watching.stop();
        if (failedAttempt === current) return;
        if (stale || !synced) report({ state: synced ? "resynced" : "synced", specs: entries.size, reason: `${entries.size} specs` });
        synced = true;
        stale = false;
        // Back off afresh only once a watch has held for a while, not after every quick failure.
        settled = setTimeout(() => (failures = 0), 30_000);
        settled.unref();
      },
      (error: unknown) => {
        if (stopped || overflow || watcher !== watching) return;
        failed(error);
      },
    );
  }

  async function answer(name: string, call: PortCall): Promise<CredSpecLookup> {
    const known = synced ? entries.get(name) : undefined;
    if (known && !stale) {
      countRequest("cacheHits", call.signal);
      return known;
    }
    if (!known) {
      if (notFound.recalls(name, notFoundTtl())) {
        countRequest("cacheHits", call.signal);
        return { kind: "notFound" };
      }
      countRequest("cacheMisses", call.signal);
      const sent = stores;
      const read = await options.direct.lookup(name, call);
      if (read.kind !== "notFound") return read;
      // The watch may have brought the spec while the GET was on its way: believe it, being newer.
      // Only then: what the cache held before the GET (a list whose watch never opened, say) is
      // older than the API server's answer.
      const arrived = (storedAt.get(name) ?? 0) > sent ? entries.get(name) : undefined;
      if (arrived) return arrived;
      notFound.remember(name);
      return read;
    }
    countRequest("cacheMisses", call.signal);
    // A stale cache may hold specs deleted or changed since: ask first, fall back to what it
    // knows only when the API server cannot answer.
    try {
      return await options.direct.lookup(name, call);
    } catch (error) {
      if (!(error instanceof ClusterUnavailableError) || call.signal.aborted) throw error;
      servedStale();
      return known;
    }
  }

  /**
   * Starts the list+watch once the current turn of the event loop is over: the admission whose
   * lookup asked for it is answered first, its read on the connection it already has. Paging
   * through a large list is CPU and a second connection the first admission of a cold instance
   * would otherwise wait behind.
   */
  function startSoon(): void {
    setImmediate(() => {
      starting = false;
      if (!watcher && !stopped && !overflow) start();
    });
  }

  return {
    async lookup(name, call) {
      if (watcher || starting || stopped || overflow) return answer(name, call);
      starting = true;
      try {
        return await answer(name, call);
      } finally {
        startSoon();
      }
    },
    knownNames: () => (synced && !stale ? [...entries.keys()] : undefined),
    status: () => ({ started: watcher !== undefined, synced, stale, size: entries.size, notFound: notFound.size, overflow }),
    async stop() {
      stopped = true;
      clearTimeout(retry);
      clearTimeout(settled);
      watcher?.stop();
    },
  };
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message.split("\n", 1)[0]!.slice(0, 200);
  return String(error).slice(0, 200);
}
