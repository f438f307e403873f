import type { CredSpecSource } from "../gmsa/ports.js";
import { countRequest } from "../observability/requestCounters.js";

/**
 * Credential spec names the API server said it does not have, kept for a few seconds so that a
 * pod naming many unknown names, or many pods naming the same one, do not cost a GET each time.
 * The price is that a spec created within that time is still called unknown: whoever owns a
 * watch forgets a name as soon as the spec appears, and without one the time is kept short.
 * Only "not found" is kept, never a failure; the oldest names go first when it is full.
 */
export interface NotFoundMemory {
  remember(name: string): void;
  /** True when the API server said `name` was not there less than `maxAgeMs` ago. */
  recalls(name: string, maxAgeMs: number): boolean;
  forget(name: string): void;
  readonly size: number;
}

export interface NotFoundMemoryOptions {
  readonly maxEntries?: number;
  readonly now?: () => number;
}

export function notFoundMemory(options: NotFoundMemoryOptions = {}): NotFoundMemory {
  const maxEntries = options.maxEntries ?? 4096;
  const now = options.now ?? Date.now;
  const seenAt = new Map<string, number>();
  return {
    remember(name) {
      seenAt.delete(name);
      seenAt.set(name, now());
      if (seenAt.size > maxEntries) seenAt.delete(seenAt.keys().next().value!);
    },
    recalls(name, maxAgeMs) {
      const at = seenAt.get(name);
      if (at === undefined) return false;
      if (now() - at < maxAgeMs) return true;
      seenAt.delete(name);
      return false;
    },
    forget(name) {
      seenAt.delete(name);
    },
    get size() {
      return seenAt.size;
    },
  };
}

/** Reads through `source`, answering "not found" from memory for `maxAgeMs` after the API server said so. */
export function rememberingNotFound(source: CredSpecSource, memory: NotFoundMemory, maxAgeMs: () => number): CredSpecSource {
  return {
    async lookup(name, call) {
      if (memory.recalls(name, maxAgeMs())) {
        countRequest("cacheHits", call.signal);
        return { kind: "notFound" };
      }
      const found = await source.lookup(name, call);
      if (found.kind === "notFound") memory.remember(name);
      return found;
    },
  };
}
