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
