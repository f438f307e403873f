import * as fc from "fast-check";
import { isRight } from "fp-ts/Either";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { decodePodObject, Pod } from "../../../lib/gmsa/pod.js";

/**
 * Admissions decode pods with union-free codecs for speed; `Pod` (with unions, for its error
 * messages) is the definition. The two must accept the same values and give the same result.
 */
const Decode = suite("decoding a pod for an admission");

// Values shaped like pods, with every field sometimes null, missing, or of the wrong type.
const maybe = <T>(value: fc.Arbitrary<T>) => fc.oneof(value, fc.constant(null), fc.constant(undefined), fc.integer(), fc.string(), fc.constant({}));
const options = fc.record({ gmsaCredentialSpecName: maybe(fc.string()), gmsaCredentialSpec: maybe(fc.string()) }, { requiredKeys: [] });
const securityContext = fc.record({ windowsOptions: maybe(options) }, { requiredKeys: [] });
const container = fc.record({ name: maybe(fc.string()), securityContext: maybe(securityContext), image: fc.string() }, { requiredKeys: [] });
const pod = fc.record(
  {
    kind: fc.oneof(fc.constant("Pod"), fc.constant("Binding"), fc.constant(null)),
    metadata: maybe(
      fc.record(
        {
          name: maybe(fc.string()),
          generateName: maybe(fc.string()),
          namespace: maybe(fc.string()),
          annotations: maybe(fc.dictionary(fc.string(), fc.oneof(fc.string(), fc.integer()))),
        },
        { requiredKeys: [] },
      ),
    ),
    spec: maybe(
      fc.record(
        {
          securityContext: maybe(securityContext),
          containers: maybe(fc.array(maybe(container), { maxLength: 3 })),
          initContainers: maybe(fc.array(container, { maxLength: 2 })),
          ephemeralContainers: maybe(fc.array(container, { maxLength: 2 })),
          serviceAccountName: maybe(fc.string()),
          serviceAccount: maybe(fc.string()),
          hostname: maybe(fc.string()),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

Decode("accepts exactly what Pod accepts, with the same value and the same errors", () => {
  fc.assert(
    fc.property(fc.oneof(pod, fc.anything()), (value) => {
      const quick = decodePodObject(value);
      const reference = Pod.decode(value);
      assert.is(isRight(quick), isRight(reference));
      assert.equal(quick, reference);
    }),
    { numRuns: 3000 },
  );
});

Decode("a refused pod gets the errors Pod itself gives, for the message", () => {
  const decoded = decodePodObject({ kind: "Pod", spec: { hostname: 7 } });
  assert.not.ok(isRight(decoded));
  const described = Pod.decode({ kind: "Pod", spec: { hostname: 7 } });
  assert.equal(decoded, described);
});

Decode.run();
