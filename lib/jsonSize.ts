/**
 * Sizes of parsed JSON values, counted without writing them out (a value may be large) and
 * without recursion (it may be deep).
 */

/**
 * How many bytes the Kubernetes API server takes to write a parsed value as compact JSON: UTF-8,
 * and Go's escapes (`<`, `>`, `&`, U+2028 and U+2029 as `\u00XX`, control characters as short
 * or `\u00XX` escapes). What it sends for one object is this and a newline; numbers may be
 * written a few characters differently.
 */
export function jsonSize(value: unknown): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") size += stringJsonSize(next);
    else if (typeof next === "number") size += Number.isFinite(next) ? String(next).length : 4;
    else if (typeof next === "boolean") size += next ? 4 : 5;
    else if (next === null || next === undefined) size += 4;
    else if (Array.isArray(next)) {
      size += 2 + Math.max(0, next.length - 1);
      for (const item of next) pending.push(item);
    } else if (typeof next === "object") {
      const entries = Object.entries(next);
      size += 2 + Math.max(0, entries.length - 1);
      for (const [key, item] of entries) {
        size += stringJsonSize(key) + 1;
        pending.push(item);
      }
    }
  }
  return size;
}

// Characters written as themselves, one byte each: printable ASCII but `"`, `\`, `<`, `>` and `&`.
const plain = /^[\x20\x21\x23-\x25\x27-\x3b\x3d\x3f-\x5b\x5d-\x7e]*$/;

function stringJsonSize(text: string): number {
  if (plain.test(text)) return text.length + 2;
  let size = 2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 || c === 0x5c || c === 0x0a || c === 0x0d || c === 0x09) size += 2;
    else if (c < 0x20 || c === 0x3c || c === 0x3e || c === 0x26 || c === 0x2028 || c === 0x2029) size += 6;
    else if (c < 0x80) size += 1;
    else if (c < 0x800) size += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      size += 4;
      i += 1;
    } else size += 3;
  }
  return size;
}

/** Whether a parsed JSON value nests objects and arrays more than `depth` levels deep; counted without recursion. */
export function nestedDeeperThan(value: unknown, depth: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length > 0) {
    const [next, level] = pending.pop()!;
    if (next === null || typeof next !== "object") continue;
    if (level >= depth) return true;
    for (const item of Array.isArray(next) ? next : Object.values(next)) pending.push([item, level + 1]);
  }
  return false;
}

/**
 * A copy of a JSON value, laid out as JSON.parse lays out what it reads, which is what heldBytes
 * counts: not what JSON.parse made from text that gives a key many times (it keeps the room of
 * every copy), nor what structuredClone makes (an object with keys such as "1023" becomes an
 * array of as many slots). Recursive, so only for a value known to nest a few levels at most.
 */
export function jsonCopy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/**
 * Whether `bytes` of text parsed into a value that, written again, takes much less: a key given
 * twice, or space around the values. Such text may hold more than heldBytes counts (a key given
 * many times leaves its object the room of all of them), and a reader that counts what it keeps
 * refuses it. The API server writes neither; a few bytes a number may differ by are let through.
 */
export function parsedFromLonger(bytes: number, value: unknown): boolean {
  return bytes > jsonSize(value) + 4096;
}

/**
 * At least how many bytes of V8's heap a value made by JSON.parse takes. Not its JSON's length:
 * `{}` is two characters and a 64-byte object, so a value of empty objects and arrays takes
 * 13 to 21 times its JSON's length once parsed, where a credential spec, mostly strings, takes
 * about as much. Measured on Node 22 (64-bit, no pointer compression): an empty object 64 bytes,
 * an empty array 40 and another 48 with its elements' store, each element a slot of 8, a string
 * a header and one byte per character, two where any character is past Latin-1, in words of 8.
 * Each property is counted as its slot and what a shape of its own costs (a map and a descriptor
 * per key, 140 bytes in all), and its key as a string of its own: objects of one shape share
 * these, but the keys one object brings need not repeat anywhere else; from 128 properties on,
 * the properties sit in a hash table of the object's own instead.
 * What is counted is what the value holds as jsonCopy lays it out: an object JSON.parse made from
 * text that gives a key many times keeps the room of every copy, which this does not see.
 */
export function heldBytes(value: unknown): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") size += stringHeldBytes(next);
    else if (typeof next === "number") size += 16;
    else if (Array.isArray(next)) {
      size += (next.length === 0 ? 40 : 48) + 8 * next.length;
      for (const item of next) pending.push(item);
    } else if (next !== null && typeof next === "object") {
      const entries = Object.entries(next);
      size += 64 + (entries.length > maxFastProperties ? 96 : 144) * entries.length;
      let lastIndex = -1;
      let indexKeys = 0;
      for (const [key, item] of entries) {
        size += stringHeldBytes(key);
        if (arrayIndex.test(key)) {
          lastIndex = Math.max(lastIndex, Number(key));
          indexKeys += 1;
        }
        pending.push(item);
      }
      // Keys such as "34" are kept as elements: in a store as long as the largest of them while
      // it is no more than a few dozen slots a key (past that, in a hash table the properties'
      // count covers), and counted so up to 32 slots a key, or 64 in all.
      if (indexKeys > 0) size += 16 + 8 * Math.min(lastIndex + 1, Math.max(64, 32 * indexKeys));
    }
  }
  return size;
}

/** From 128 properties on, JSON.parse keeps an object's properties in a hash table of its own. */
const maxFastProperties = 127;

/** A key that is an array index, as JavaScript reads one: "0", "34", not "034" or "-1". */
const arrayIndex = /^(0|[1-9][0-9]{0,8})$/;

const latin1 = /^[\x00-\xff]*$/;

function stringHeldBytes(text: string): number {
  // A header, and the characters in whole words of 8 bytes.
  return 16 + 8 * Math.ceil((latin1.test(text) ? text.length : 2 * text.length) / 8);
}
