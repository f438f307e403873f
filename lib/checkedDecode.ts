import * as t from "io-ts";

/**
 * `codec.decode`, checking with `codec.is` first. For codecs that only check values and never
 * change them (the review and pod codecs: no defaults, no conversions), a value `is` accepts is
 * exactly what `decode` would give back, and `is` builds neither a context per property nor an
 * Either per value: in the serving process the decodes of a review were its largest single step.
 * A value `is` refuses is decoded as before, for the errors. Only for what JSON.parse made, as
 * every review body is: `is` passes over the holes of a JavaScript array, which `decode` refuses,
 * and JSON has none (test/property/checkedDecode.test.ts holds the two to the same answers).
 */
export function checkedDecode<C extends t.Any>(codec: C, value: unknown): t.Validation<t.TypeOf<C>> {
  return codec.is(value) ? t.success(value as t.TypeOf<C>) : codec.decode(value);
}

const absent = t.union([t.null, t.undefined]);

/**
 * `codec`, or null or undefined for absent: a union, so that a decoding error lists what was
 * expected there. Kubernetes omits empty fields, but hand-written requests may carry `null`.
 * The union is io-ts's own, with its name, decode and encode; only its `is` is written out, as
 * the same answer without the closure io-ts's union makes on every call (checking a pod runs a
 * score of these).
 */
export function optional<C extends t.Mixed>(codec: C): t.UnionC<[C, typeof absent]> {
  const union = t.union([codec, absent]);
  return new t.UnionType(union.name, (u): u is t.TypeOf<typeof union> => u === undefined || u === null || codec.is(u), union.validate, union.encode, union.types);
}
