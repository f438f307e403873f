import { parse, type AnyNode } from "@humanwhocodes/momoa";
import { canonicalJson, jsonEqual } from "./canonicalJson.js";

/**
 * Whether contents a pod carries are the named credential spec, or why not. The runtime hands
 * these bytes to Windows, whose parser is not JavaScript's: a key given twice may be read with
 * either value there, so such contents are refused outright, and so is nesting far deeper than
 * any credential spec has (it only serves to exhaust a recursive parser).
 */
export const maxContentsDepth = 64;

// The ports hand out credential specs as read-only records that live as long as the cache
// holds them: their canonical form is computed once per record, not once per admission.
const canonicalForms = new WeakMap<object, string>();

/** The bytes this product inlines for a credential spec, as `canonicalJson` writes them. */
export function canonicalContents(credspec: Readonly<Record<string, unknown>>): string {
  let contents = canonicalForms.get(credspec);
  if (contents === undefined) {
    contents = canonicalJson(credspec);
    canonicalForms.set(credspec, contents);
  }
  return contents;
}

export function contentsProblem(contents: string, credspec: Readonly<Record<string, unknown>>): string | undefined {
  // Cheap first: contents this product inlined are byte-identical to the canonical form, which
  // has neither duplicate keys nor unusual depth.
  if (contents === canonicalContents(credspec)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(contents);
  } catch {
    return "the GMSA credential spec contents are not valid JSON, so they cannot match";
  }
  if (depthExceeds(parsed, maxContentsDepth)) return `the GMSA credential spec contents are nested more than ${maxContentsDepth} levels deep, so they cannot match`;
  const duplicate = duplicateKey(contents);
  if (duplicate !== undefined) return `the GMSA credential spec contents give the key ${JSON.stringify(duplicate.slice(0, 80))} more than once, so they cannot match`;
  return jsonEqual(parsed, credspec) ? undefined : "the GMSA credential spec contents do not match";
}

/** True when a parsed JSON value nests arrays or objects more than `max` levels; never recurses. */
export function depthExceeds(value: unknown, max: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [next, depth] = pending.pop()!;
    if (typeof next !== "object" || next === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Object.values(next)) pending.push([child, depth + 1]);
  }
  return false;
}

/**
 * The first key that an object in `text` gives twice, at any depth. Call only on text already
 * known to be JSON within `maxContentsDepth`: the parser recurses once per level.
 */
export function duplicateKey(text: string): string | undefined {
  const pending: AnyNode[] = [parse(text).body];
  while (pending.length > 0) {
    const node = pending.pop()!;
    if (node.type === "Array") {
      for (const element of node.elements) pending.push(element.value);
    } else if (node.type === "Object") {
      const seen = new Set<string>();
      for (const member of node.members) {
        const key = member.name.type === "String" ? member.name.value : member.name.name;
        if (seen.has(key)) return key;
        seen.add(key);
        pending.push(member.value);
      }
    }
  }
  return undefined;
}
