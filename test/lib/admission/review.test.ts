import * as fc from "fast-check";
import { isRight, map } from "fp-ts/Either";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { AdmissionReview, AdmissionReviewEnvelope, decodeReviewRequest } from "../../../lib/admission/review.js";

/** Once the envelope is good, decoding the request alone answers as decoding the whole review does. */
const Request = suite("decoding the request of an AdmissionReview");

const maybe = <T>(value: fc.Arbitrary<T>) => fc.oneof(value, fc.constant(null), fc.constant(undefined), fc.integer(), fc.string());
const request = fc.record(
  {
    uid: fc.string(),
    kind: maybe(fc.record({ group: maybe(fc.string()), version: maybe(fc.string()), kind: maybe(fc.string()) })),
    operation: maybe(fc.constantFrom("CREATE", "UPDATE", "DELETE")),
    name: maybe(fc.string()),
    namespace: maybe(fc.string()),
    userInfo: maybe(fc.record({ username: maybe(fc.string()), groups: maybe(fc.array(maybe(fc.string()), { maxLength: 3 })) }, { requiredKeys: [] })),
    object: fc.anything(),
    dryRun: maybe(fc.boolean()),
  },
  { requiredKeys: ["uid"] },
);
const review = fc.record({ apiVersion: fc.constantFrom("admission.k8s.io/v1", "admission.k8s.io/v1beta1"), kind: fc.constant("AdmissionReview"), request });

Request("gives the whole review's request, or its errors", () => {
  fc.assert(
    fc.property(review, (body) => {
      assert.ok(isRight(AdmissionReviewEnvelope.decode(body)));
      const whole = map((r: AdmissionReview) => r.request)(AdmissionReview.decode(body));
      assert.equal(decodeReviewRequest(body), whole);
    }),
    { numRuns: 3000 },
  );
});

Request.run();
