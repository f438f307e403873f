import { isRight } from "fp-ts/Either";
import * as t from "io-ts";
import { AdmissionRequest } from "../webhook/request.js";

/** The AdmissionReview wire format, in the two versions the API server may send. */
export const admissionVersions = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] as const;
export type AdmissionVersion = (typeof admissionVersions)[number];

export const AdmissionReview = t.intersection([
  t.type({
    apiVersion: t.keyof({ "admission.k8s.io/v1": null, "admission.k8s.io/v1beta1": null }),
    kind: t.literal("AdmissionReview"),
    request: AdmissionRequest,
  }),
  t.partial({}),
]);
export type AdmissionReview = t.TypeOf<typeof AdmissionReview>;

const ReviewRequest = t.type({ request: AdmissionRequest });

/**
 * The request of a body already known to be an AdmissionReview envelope: decoding `request`
 * alone accepts what decoding the whole review accepts, without checking the envelope twice.
 * A body it refuses is decoded again as a whole review, so that the errors read the same.
 */
export function decodeReviewRequest(body: unknown): t.Validation<AdmissionRequest> {
  // `is`, not decode, for the quick answer: see checkedDecode.
  if (ReviewRequest.is(body)) return t.success(body.request);
  const review = AdmissionReview.decode(body);
  return isRight(review) ? t.success(review.right.request) : review;
}

/** Just enough to know a body is an AdmissionReview and whom to answer. */
export const AdmissionReviewEnvelope = t.type({
  apiVersion: t.keyof({ "admission.k8s.io/v1": null, "admission.k8s.io/v1beta1": null }),
  kind: t.literal("AdmissionReview"),
  request: t.type({ uid: t.string }),
});

/** metav1.Status, as much of it as an admission denial carries. */
export interface Status {
  readonly status: "Failure";
  readonly code: number;
  readonly reason: string;
  readonly message: string;
}

export interface AdmissionResponse {
  readonly uid: string;
  readonly allowed: boolean;
  readonly status?: Status;
  readonly patch?: string;
  readonly patchType?: "JSONPatch";
  readonly warnings?: readonly string[];
  readonly auditAnnotations?: Readonly<Record<string, string>>;
}

export interface AdmissionReviewResponse {
  readonly apiVersion: AdmissionVersion;
  readonly kind: "AdmissionReview";
  readonly response: AdmissionResponse;
}
