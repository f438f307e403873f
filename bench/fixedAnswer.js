// What both floors of the production bench answer (bench/minimalApp.js, bench/readingApp.mjs): a
// fixed allowed AdmissionReview with a fixed patch, echoing only the request's UID.
"use strict";

const patch = Buffer.from(JSON.stringify([{ op: "add", path: "/metadata/labels", value: { bench: "floor" } }])).toString("base64");

/** The HTTP response a floor's function returns for the review of this UID. */
function fixedAnswer(uid) {
  return {
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, allowed: true, patchType: "JSONPatch", patch } }),
  };
}

module.exports = { fixedAnswer };
