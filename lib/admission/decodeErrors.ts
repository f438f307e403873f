import type * as t from "io-ts";
import { formatValidationErrors } from "io-ts-reporters";

/**
 * A reporter's words for what failed to decode, trimmed: a few errors say enough, and a
 * message must never echo a whole pod back to the client. The reporter prints the offending
 * values in full (recursively), so it is only ever shown a shallow, short preview of them:
 * a value nested a hundred thousand levels deep must give a message, not a stack overflow.
 */
export function describeDecodeErrors(errors: t.Errors, max = 3, width = 160): string {
  const lines = formatValidationErrors(errors.map(withPreviews), { truncateLongTypes: true });
  const shown = lines.slice(0, max).map((line) => (line.length > width ? `${line.slice(0, width)}…` : line));
  return shown.join("; ") + (lines.length > max ? ` (and ${lines.length - max} more)` : "");
}

function withPreviews(error: t.ValidationError): t.ValidationError {
  return {
    ...error,
    value: preview(error.value),
    context: error.context.map((entry) => ({ ...entry, actual: preview(entry.actual) })),
  };
}

const previewDepth = 2;
const previewItems = 4;
const previewChars = 60;

/** A small copy of a decoded JSON value: a few levels, a few items, short strings. */
export function preview(value: unknown, depth = previewDepth): unknown {
  if (typeof value === "string") return value.length > previewChars ? `${value.slice(0, previewChars)}…` : value;
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    if (depth === 0) return value.length === 0 ? [] : ["…"];
    const items = value.slice(0, previewItems).map((item) => preview(item, depth - 1));
    return value.length > previewItems ? [...items, "…"] : items;
  }
  const entries = Object.entries(value);
  if (depth === 0) return entries.length === 0 ? {} : { "…": "…" };
  const shown = Object.fromEntries(entries.slice(0, previewItems).map(([k, v]) => [k.slice(0, previewChars), preview(v, depth - 1)]));
  return entries.length > previewItems ? { ...shown, "…": "…" } : shown;
}
