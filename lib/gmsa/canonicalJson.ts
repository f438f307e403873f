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
// except around surrogate pairs, so compare encoded bytes.
function byUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

function encode(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return encodeString(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`cannot encode ${value} as JSON`);
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      if (Array.isArray(value)) return `[${value.map(encode).join(",")}]`;
      return `{${Object.keys(value)
        .sort(byUtf8)
        .map((key) => `${encodeString(key)}:${encode((value as Record<string, unknown>)[key])}`)
        .join(",")}}`;
    default:
      throw new TypeError(`cannot encode a ${typeof value} as JSON`);
  }
}

/** JSON equality as the domain defines it: key order and whitespace do not matter, array order does. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  return (
    keys.length === Object.keys(right).length &&
    keys.every((key) => Object.hasOwn(right, key) && jsonEqual(left[key], right[key]))
  );
}
