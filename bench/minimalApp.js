// The floor of the production path, for `npm run bench`: the least an Azure Functions webhook does,
// written with the same @azure/functions programming model as the product and bundled the same way.
// Each function reads the AdmissionReview, parses it, and answers a fixed allowed AdmissionReview
// with a fixed patch, echoing only the request's UID.
"use strict";
const { app } = require("@azure/functions");

const patch = Buffer.from(JSON.stringify([{ op: "add", path: "/metadata/labels", value: { bench: "floor" } }])).toString("base64");

async function answer(request) {
  const review = JSON.parse(await request.text());
  const uid = review && review.request && review.request.uid;
  return {
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, allowed: true, patchType: "JSONPatch", patch } }),
  };
}

for (const name of ["mutate", "validate", "validate-credspec"]) {
  app.http(name, { route: name, methods: ["POST"], authLevel: "anonymous", handler: answer });
}
