/**
 * Sizes of parsed JSON values, counted without writing them out (a value may be large) and
 * without recursion (it may be deep).
 */

/** About how many characters a parsed JSON value takes written out again. */
export function jsonSize(value: unknown): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") size += next.length + 2;
    else if (typeof next === "number" || typeof next === "boolean") size += 8;
    else if (next === null || next === undefined) size += 4;
    else if (Array.isArray(next)) {
      size += 2 + next.length;
      for (const item of next) pending.push(item);
    } else if (typeof next === "object") {
      size += 2;
      for (const [key, item] of Object.entries(next)) {
        size += key.length + 4;
        pending.push(item);
      }
    }
  }
  return size;
}

/**
 * At least how many bytes of V8's heap a value made by JSON.parse takes. Not its JSON's length:
 * `{}` is two characters and a 64-byte object, so a value of empty objects and arrays takes
 * 13 to 21 times its JSON's length once parsed, where a credential spec, mostly strings, takes
 * about as much as its JSON. Measured on Node 22 (64-bit, no pointer compression): an empty
 * object 64 bytes, an empty array 40, each further property or element a slot of 8, a string
 * its characters and a header; key names are shared between objects and not counted.
 */
export function heldBytes(value: unknown): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") size += 16 + next.length;
    else if (typeof next === "number") size += 16;
    else if (Array.isArray(next)) {
      size += 40 + 8 * next.length;
      for (const item of next) pending.push(item);
    } else if (next !== null && typeof next === "object") {
      const entries = Object.entries(next);
      size += 64 + 8 * entries.length;
      for (const [, item] of entries) pending.push(item);
    }
  }
  return size;
}
