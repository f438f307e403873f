import * as t from "io-ts";
import { optional } from "../checkedDecode.js";

/**
 * The parts of a Binding (pods/binding, or the older bindings resource) the GMSA policy reads.
 * Binding a pod to a node copies the binding's annotations onto the pod without an UPDATE of
 * the pod, so those annotations are the only part that matters here.
 */
export const Binding = t.intersection([
  t.type({ kind: t.literal("Binding") }),
  t.partial({
    metadata: optional(
      t.partial({
        name: optional(t.string),
        namespace: optional(t.string),
        annotations: optional(t.record(t.string, t.string)),
      }),
    ),
  }),
]);
export type Binding = t.TypeOf<typeof Binding>;
