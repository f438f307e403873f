/** The field manager the product applies its objects as (server-side apply records it on each). */
export const productFieldManager = "gmsa-admission";

/**
 * Where a stored object differs from what was rendered: every field the project rendered must be
 * stored with the same value. The API server may add fields (defaults, status, bookkeeping), never
 * drop or change one. Arrays are compared element by element and must keep their length.
 */
export function renderedFieldsNotStored(rendered: unknown, stored: unknown, path = ""): string[] {
  if (Array.isArray(rendered)) {
    if (!Array.isArray(stored)) return [`${path || "(object)"}: rendered an array, stored ${JSON.stringify(stored)}`];
    if (rendered.length !== stored.length) return [`${path}: rendered ${rendered.length} items, stored ${stored.length}`];
    return rendered.flatMap((item, i) => renderedFieldsNotStored(item, stored[i], `${path}[${i}]`));
  }
  if (rendered !== null && typeof rendered === "object") {
    if (stored === null || typeof stored !== "object" || Array.isArray(stored)) return [`${path || "(object)"}: rendered an object, stored ${JSON.stringify(stored)}`];
    return Object.entries(rendered).flatMap(([key, value]) => {
      const at = path === "" ? key : `${path}.${key}`;
      return Object.hasOwn(stored, key) ? renderedFieldsNotStored(value, (stored as Record<string, unknown>)[key], at) : [`${at}: rendered, not stored`];
    });
  }
  return Object.is(rendered, stored) ? [] : [`${path}: rendered ${JSON.stringify(rendered)}, stored ${JSON.stringify(stored)}`];
}
