import fc from "fast-check";
import { isRight } from "fp-ts/Either";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { AdmissionReview, AdmissionReviewEnvelope, decodeReviewRequest } from "../../lib/admission/review.js";
import { AdmissionRequest } from "../../lib/webhook/request.js";
import { checkedDecode } from "../../lib/checkedDecode.js";
import { decodePodObject, Pod } from "../../lib/gmsa/pod.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * The decodes on the admission path check with `is` first and hand back the value itself when
 * it passes. That is only right if, for every input, they answer exactly what io-ts's own
 * decode answers: the same verdict, the same value, the same errors. Inputs are reviews of GMSA
 * pods with a few fields replaced at random by values of other types, removed, or given extra
 * members, so that both verdicts come up often; each input is what JSON.parse makes of it, as
 * every body the webhook decodes is (a JavaScript array with holes is one thing `is` and
 * `decode` judge apart, and JSON has none).
 */
const Checked = suite("checked decodes answer as io-ts decode does");

const runs = Number(process.env.PROPERTY_RUNS ?? 300) * 2;

const paths: ReadonlyArray<readonly string[]> = [
  [],
  ["apiVersion"],
  ["kind"],
  ["request"],
  ["request", "uid"],
  ["request", "kind"],
  ["request", "kind", "group"],
  ["request", "operation"],
  ["request", "namespace"],
  ["request", "name"],
  ["request", "dryRun"],
  ["request", "userInfo"],
  ["request", "userInfo", "groups"],
  ["request", "userInfo", "groups", "0"],
  ["request", "userInfo", "extra"],
  ["request", "userInfo", "extra", "scopes"],
  ["request", "resource", "resource"],
  ["request", "object"],
  ["request", "object", "kind"],
  ["request", "object", "metadata"],
  ["request", "object", "metadata", "name"],
  ["request", "object", "metadata", "annotations"],
  ["request", "object", "metadata", "annotations", "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name"],
  ["request", "object", "spec"],
  ["request", "object", "spec", "serviceAccountName"],
  ["request", "object", "spec", "securityContext"],
  ["request", "object", "spec", "securityContext", "windowsOptions"],
  ["request", "object", "spec", "containers"],
  ["request", "object", "spec", "containers", "0"],
  ["request", "object", "spec", "containers", "0", "name"],
  ["request", "object", "spec", "containers", "0", "securityContext"],
  ["request", "object", "spec", "containers", "0", "securityContext", "windowsOptions"],
  ["request", "object", "spec", "containers", "0", "securityContext", "windowsOptions", "gmsaCredentialSpecName"],
  ["request", "object", "spec", "containers", "0", "securityContext", "windowsOptions", "gmsaCredentialSpec"],
  ["request", "object", "spec", "initContainers"],
  ["request", "object", "spec", "ephemeralContainers", "0"],
];

const removed = Symbol("removed");
const replacements: unknown[] = [removed, null, 0, 1.5, "", "x", true, false, [], ["x"], [1], {}, { a: "b" }, { name: "c" }, { kind: "Pod" }];

/** A copy of `value` with the value at `path` replaced (or removed), creating objects on the way. */
function replaced(value: unknown, path: readonly string[], replacement: unknown): unknown {
  if (path.length === 0) return replacement === removed ? undefined : replacement;
  const [head, ...rest] = path as [string, ...string[]];
  const container: Record<string, unknown> | unknown[] = Array.isArray(value)
    ? [...(value as unknown[])]
    : typeof value === "object" && value !== null
      ? { ...(value as Record<string, unknown>) }
      : {};
  const next = replaced((container as Record<string, unknown>)[head], rest, replacement);
  if (next === undefined && rest.length === 0 && replacement === removed) delete (container as Record<string, unknown>)[head];
  else (container as Record<string, unknown>)[head] = next;
  return container;
}

function base(): unknown {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  return review("CREATE", p, { userInfo: { username: "alice", uid: "u-1", groups: ["developers", "system:authenticated"], extra: { scopes: ["a"] } } });
}

const inputs = fc
  .array(fc.record({ path: fc.constantFrom(...paths), value: fc.constantFrom(...replacements) }), { maxLength: 3 })
  .map((changes) => changes.reduce<unknown>((value, { path, value: replacement }) => replaced(value, path, replacement), base()))
  // What the webhook decodes is always JSON.parse's output: no holes in arrays, no undefined.
  .map((value) => (value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown)));

function sameAnswer(label: string, checked: ReturnType<typeof checkedDecode>, plain: ReturnType<typeof checkedDecode>): boolean {
  assert.is(isRight(checked), isRight(plain), `${label}: the same verdict`);
  if (isRight(checked) && isRight(plain)) assert.equal(checked.right, plain.right, `${label}: the same value`);
  else assert.equal((checked as { left: unknown }).left, (plain as { left: unknown }).left, `${label}: the same errors`);
  return isRight(checked);
}

Checked("envelope, request and pod decodes equal io-ts decode on random near-reviews", () => {
  const verdicts = { right: 0, left: 0, podRight: 0, podLeft: 0 };
  fc.assert(
    fc.property(inputs, (input) => {
      const envelope = sameAnswer("envelope", checkedDecode(AdmissionReviewEnvelope, input), AdmissionReviewEnvelope.decode(input));
      if (envelope) {
        // Behind a good envelope (where the webhook calls it), decodeReviewRequest answers as
        // decoding the whole review does.
        const whole = AdmissionReview.decode(input);
        const request = decodeReviewRequest(input);
        assert.is(isRight(request), isRight(whole), "request: the same verdict as the whole review");
        if (isRight(request) && isRight(whole)) assert.equal(request.right, whole.right.request);
        else assert.equal((request as { left: unknown }).left, (whole as { left: unknown }).left);
      }
      verdicts[
        sameAnswer(
          "request codec",
          checkedDecode(AdmissionRequest, (input as { request?: unknown } | undefined)?.request),
          AdmissionRequest.decode((input as { request?: unknown } | undefined)?.request),
        )
          ? "right"
          : "left"
      ] += 1;
      const object = (input as { request?: { object?: unknown } } | undefined)?.request?.object;
      verdicts[sameAnswer("pod", decodePodObject(object), Pod.decode(object)) ? "podRight" : "podLeft"] += 1;
    }),
    { numRuns: runs },
  );
  // Both verdicts must come up, or the property held without testing the fast path or the slow one.
  for (const [verdict, count] of Object.entries(verdicts)) assert.ok(count >= runs / 20, `${verdict}: ${count} of ${runs}`);
});

Checked.run();
