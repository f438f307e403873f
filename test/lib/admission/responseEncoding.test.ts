import * as fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { AdmissionReviewResponse } from "../../../lib/admission/review.js";
import { encodeReview, responseFor } from "../../../lib/admission/response.js";
import { addOperation } from "../../../lib/webhook/jsonPatch.js";
import { allowed, denied } from "../../../lib/webhook/verdict.js";

/** The text of an answer is JSON.stringify's, byte for byte, whatever the strings in it hold. */
const Encoding = suite("writing an AdmissionReview answer");

// Strings that look like the patch key, quotes and escapes, anywhere a caller's text can go.
const tricky = fc.oneof(fc.string(), fc.constantFrom('"patch":""', '","patch":"', '\\"patch\\":\\"\\"', "patch", "\\", '"', ""), fc.string({ unit: "grapheme" }));
const operation = fc.record({ path: fc.array(fc.oneof(tricky, fc.nat()), { minLength: 1, maxLength: 4 }), value: fc.oneof(tricky, fc.jsonValue()) });
const verdict = fc.oneof(
  fc
    .record({ patch: fc.array(operation, { maxLength: 3 }), warnings: fc.array(tricky, { maxLength: 2 }), credSpecs: fc.array(tricky, { maxLength: 2 }) })
    .map(({ patch, warnings, credSpecs }) => allowed({ patch: patch.map((op) => addOperation(op.path, op.value)), warnings, credSpecs })),
  fc.record({ message: tricky, warnings: fc.array(tricky, { maxLength: 2 }) }).map(({ message, warnings }) => denied(422, message, { warnings })),
);
const answer = fc.record({ apiVersion: fc.constantFrom("admission.k8s.io/v1" as const, "admission.k8s.io/v1beta1" as const), uid: tricky, verdict });

Encoding("writes what JSON.stringify writes, for any uid, patch, warning or message", () => {
  fc.assert(
    fc.property(answer, ({ apiVersion, uid, verdict }) => {
      const review: AdmissionReviewResponse = { apiVersion, kind: "AdmissionReview", response: responseFor(uid, verdict) };
      // Twice: the second time a one-operation patch comes from what the first remembered.
      assert.is(encodeReview(review), JSON.stringify(review));
      assert.is(encodeReview({ ...review, response: responseFor(uid, verdict) }), JSON.stringify(review));
    }),
    { numRuns: 2000 },
  );
});

Encoding("a one-operation patch is the same for the same contents at another path, and differs with the contents", () => {
  const at = (index: number, contents: string) =>
    JSON.parse(Buffer.from(responseFor("u", allowed({ patch: [addOperation(["spec", "containers", index, "x"], contents)] })).patch!, "base64").toString());
  assert.equal(at(0, "{}"), [{ op: "add", path: "/spec/containers/0/x", value: "{}" }]);
  assert.equal(at(1, "{}"), [{ op: "add", path: "/spec/containers/1/x", value: "{}" }]);
  assert.equal(at(0, '{"a":1}'), [{ op: "add", path: "/spec/containers/0/x", value: '{"a":1}' }]);
});

Encoding("a patch it did not encode itself is written by JSON.stringify", () => {
  for (const patch of ['not "base64"', "\\", "\u0001", "W10="]) {
    const review: AdmissionReviewResponse = { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: "u", allowed: true, patch, patchType: "JSONPatch" } };
    assert.is(encodeReview(review), JSON.stringify(review));
  }
});

Encoding.run();
