/** RFC 6902 operations, the only shape of change the webhook hands back to the API server. */
export type PatchOperation =
  | { op: "add"; path: string; value: unknown }
  | { op: "replace"; path: string; value: unknown };

/** RFC 6901: `~` and `/` inside a segment are written `~0` and `~1`, in that order. */
export function jsonPointer(segments: ReadonlyArray<string | number>): string {
  return segments.map((s) => `/${String(s).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

export function addOperation(segments: ReadonlyArray<string | number>, value: unknown): PatchOperation {
  return { op: "add", path: jsonPointer(segments), value };
}
