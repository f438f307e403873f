/** The parts of a request target the local host routes and authorizes by. */
export interface RequestTarget {
  readonly pathname: string;
  readonly searchParams: URLSearchParams;
  /** The whole URL, as a Functions request carries it. */
  href(): string;
}

// Path segments of letters, digits, `-` and `_` (every route and URL-wired secret this app has),
// and a query of unreserved characters, `=`, `&`, `+` and percent escapes. The WHATWG parser
// leaves such a target as it is: no dot segments, no backslashes, no empty segment that could make
// `//host` an authority, nothing it would percent-encode.
const plainTarget = /^((?:\/[A-Za-z0-9_-]+)+\/?)(?:\?([A-Za-z0-9_.~=&+%-]*))?$/;

/** Whether `requestTarget` splits this target itself rather than through the WHATWG parser. */
export function isPlainTarget(target: string): boolean {
  return plainTarget.test(target);
}

/**
 * Splits a request target into its path and query as `new URL(target, base)` would. The parser
 * costs several microseconds per request, as much as some of the policy, so the plain targets the
 * API server sends are split directly and anything else goes to it. `base` must be a valid
 * absolute URL (the local host passes its own address): a plain target never parses it.
 */
export function requestTarget(target: string, base: string): RequestTarget {
  const plain = plainTarget.exec(target);
  if (!plain) {
    const url = new URL(target, base);
    return { pathname: url.pathname, searchParams: url.searchParams, href: () => url.href };
  }
  const pathname = plain[1]!;
  const searchParams = new URLSearchParams(plain[2] ?? "");
  return { pathname, searchParams, href: () => new URL(target, base).href };
}
