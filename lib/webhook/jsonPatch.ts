/** RFC 6902 operations, the only shape of change the webhook hands back to the API server. */
export type PatchOperation = { op: "add"; path: string; value: unknown } | { op: "replace"; path: string; value: unknown };

/** RFC 6901: `~` and `/` inside a segment are written `~0` and `~1`, in that order. */
export function jsonPointer(segments: ReadonlyArray<string | number>): string {
  let pointer = "";
  for (const segment of segments) pointer += `/${escapeSegment(String(segment))}`;
  return pointer;
}

// Most segments are field names and indexes with nothing to escape: they are not copied.
const needsEscape = /[~/]/;

function escapeSegment(segment: string): string {
  return needsEscape.test(segment) ? segment.replaceAll("~", "~0").replaceAll("/", "~1") : segment;
}

export function addOperation(segments: ReadonlyArray<string | number>, value: unknown): PatchOperation {
  return { op: "add", path: jsonPointer(segments), value };
}
