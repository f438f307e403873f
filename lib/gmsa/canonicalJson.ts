/**
 * The bytes a pod carries for a credential spec. Producing exactly what a Go encoder produces
 * for a decoded JSON object (compact, keys sorted by byte order, HTML-sensitive characters and
 * line separators escaped, invalid UTF-16 replaced) keeps outputs comparable across webhooks.
 */
export function canonicalJson(value: unknown): string {
  return encode(value);
}

const goEscapes: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};

function encodeString(text: string): string {
  return JSON.stringify(text.toWellFormed()).replace(/[<>&\u2028\u2029]/g, (c) => goEscapes[c] ?? c);
}

// Go orders map keys by their UTF-8 bytes; JavaScript compares UTF-16 code units. The two agree
// except around surrogate pairs, so only keys holding a surrogate are compared as encoded bytes.
const surrogate = /[\uD800-\uDFFF]/;

function byUtf8(a: string, b: string): number {
  if (surrogate.test(a) || surrogate.test(b)) return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
  return a < b ? -1 : a > b ? 1 : 0;
}

function encodeScalar(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return encodeString(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`cannot encode ${value} as JSON`);
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    default:
      throw new TypeError(`cannot encode a ${typeof value} as JSON`);
  }
}

/** One array or object being written: what is left of it, and what closes it. */
interface Open {
  readonly items: ReadonlyArray<readonly [key: string | undefined, value: unknown]>;
  next: number;
  readonly close: string;
}

// A loop with its own stack rather than recursion: a credential spec read from the cluster is
// data, and no depth of it may overflow the call stack on the request path.
function encode(root: unknown): string {
  const out: string[] = [];
  const stack: Open[] = [];
  let pending: unknown = root;
  let hasPending = true;
  for (;;) {
    if (hasPending) {
      hasPending = false;
      const value = pending;
      if (Array.isArray(value)) {
        out.push("[");
        stack.push({ items: value.map((item) => [undefined, item] as const), next: 0, close: "]" });
      } else if (typeof value === "object" && value !== null) {
        out.push("{");
        const record = value as Record<string, unknown>;
        stack.push({
          items: Object.keys(record)
            .sort(byUtf8)
            .map((key) => [key, record[key]] as const),
          next: 0,
          close: "}",
        });
      } else {
        out.push(encodeScalar(value));
      }
    }
    const top = stack.at(-1);
    if (!top) return out.join("");
    if (top.next >= top.items.length) {
      out.push(top.close);
      stack.pop();
      continue;
    }
    const [key, value] = top.items[top.next]!;
    if (top.next > 0) out.push(",");
    if (key !== undefined) out.push(`${encodeString(key)}:`);
    top.next += 1;
    pending = value;
    hasPending = true;
  }
}

/**
 * JSON equality as the domain defines it: key order and whitespace do not matter, array order
 * does. Walks pairs with its own stack, like the encoder.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  const pairs: Array<[unknown, unknown]> = [[a, b]];
  while (pairs.length > 0) {
    const [left, right] = pairs.pop()!;
    if (left === right) continue;
    if (typeof left !== "object" || typeof right !== "object" || left === null || right === null) return false;
    if (Array.isArray(left) !== Array.isArray(right)) return false;
    if (Array.isArray(left) && Array.isArray(right)) {
      if (left.length !== right.length) return false;
      left.forEach((item, i) => pairs.push([item, right[i]]));
      continue;
    }
    const l = left as Record<string, unknown>;
    const r = right as Record<string, unknown>;
    const keys = Object.keys(l);
    if (keys.length !== Object.keys(r).length) return false;
    for (const key of keys) {
      if (!Object.hasOwn(r, key)) return false;
      pairs.push([l[key], r[key]]);
    }
  }
  return true;
}
