import type * as t from "io-ts";
import { formatValidationErrors } from "io-ts-reporters";

/**
 * A reporter's words for what failed to decode, trimmed: a few errors say enough, and a
 * message must never echo a whole pod back to the client.
 */
export function describeDecodeErrors(errors: t.Errors, max = 3, width = 160): string {
  const lines = formatValidationErrors(errors, { truncateLongTypes: true });
  const shown = lines.slice(0, max).map((line) => (line.length > width ? `${line.slice(0, width)}…` : line));
  return shown.join("; ") + (lines.length > max ? ` (and ${lines.length - max} more)` : "");
}
