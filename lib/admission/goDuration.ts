/**
 * The API server tells a webhook how long it will wait as `?timeout=<Go duration>` ("10s",
 * "1m0s", "500ms"). Returns milliseconds, or undefined for anything else.
 */
const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, µs: 0.001, ns: 0.000001 };

// An API server sends the same timeout with every review: the last answer is kept.
let last: { readonly text: string; readonly ms: number | undefined } | undefined;

export function parseGoDurationMs(text: string | null | undefined): number | undefined {
  if (!text) return undefined;
  if (last?.text !== text) last = { text, ms: parse(text) };
  return last.ms;
}

// Micro is written \u00b5 (µ) in the patterns: the deployment bundle is kept to ASCII (scripts/package.ts).
function parse(text: string): number | undefined {
  if (!/^(\d+(\.\d+)?(h|ms|m|s|us|\u00b5s|ns))+$/.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|\u00b5s|ns)/g)) total += Number(amount) * units[unit!]!;
  return total;
}
