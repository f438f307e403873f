import type { CredSpecLookup, CredSpecSource, PortCall } from "./ports.js";

/** Looks every distinct name up once, concurrently: a pod may name one spec in many places. */
export async function resolveCredSpecs(source: CredSpecSource, names: Iterable<string>, call: PortCall): Promise<Map<string, CredSpecLookup>> {
  const distinct = [...new Set(names)];
  const results = await Promise.all(distinct.map((name) => source.lookup(name, call)));
  return new Map(distinct.map((name, i) => [name, results[i]!]));
}
