import * as t from "io-ts";
import type * as Reporters from "io-ts-reporters";

// The reporter is required on the first error it words, not at start: it brings most of fp-ts
// with it, about 7 ms of a new instance's start for what only a malformed request needs.
let reporters: typeof Reporters | undefined;
function formatValidationErrors(...args: Parameters<typeof Reporters.formatValidationErrors>): string[] {
  reporters ??= require("io-ts-reporters") as typeof Reporters;
  return reporters.formatValidationErrors(...args);
}

/**
 * A reporter's words for what failed to decode, trimmed: a few errors say enough, and a
 * message must never echo a whole pod back to the client. The reporter prints the offending
 * values in full (recursively), so it is only ever shown a shallow, short preview of them:
 * a value nested a hundred thousand levels deep must give a message, not a stack overflow.
 */
export function describeDecodeErrors(errors: t.Errors, max = 3, width = 160): string {
  // The reporter is slow per error and a pod may fail in thousands of places: hand it only the
  // first errors of the first few paths it reports (a path's errors together, so that a union
  // reads as one line).
  const paths = new Map<string, t.ValidationError[]>();
  for (const error of errors) {
    const path = reportedPath(error);
    const same = paths.get(path);
    if (same) same.push(error);
    else paths.set(path, [error]);
  }
  const shownPaths = [...paths.values()].slice(0, max).map((same) => same.slice(0, errorsPerPath));
  const lines = formatValidationErrors(shownPaths.flat().map(withPreviews), { truncateLongTypes: true });
  const shown = lines.slice(0, max).map((line) => (line.length > width ? `${line.slice(0, width)}…` : line));
  return shown.join("; ") + (paths.size > max ? ` (and ${paths.size - max} more)` : "");
}

const errorsPerPath = 12;

/** The path the reporter files an error under: up to the first union, whose members it lists together. */
function reportedPath(error: t.ValidationError): string {
  const keys: string[] = [];
  for (const entry of error.context) {
    if (entry.key) keys.push(entry.key);
    if (entry.type instanceof t.UnionType) break;
  }
  return keys.join(".");
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
