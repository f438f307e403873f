// The floor of the production path, for `npm run bench`: the least an Azure Functions webhook does,
// written with the same @azure/functions programming model as the product and bundled the same way.
// Each function reads the AdmissionReview, parses it, and answers a fixed allowed AdmissionReview
// with a fixed patch, echoing only the request's UID (bench/fixedAnswer.js).
"use strict";
const { app } = require("@azure/functions");
const { fixedAnswer } = require("./fixedAnswer.js");

async function answer(request) {
  const review = JSON.parse(await request.text());
  return fixedAnswer(review && review.request && review.request.uid);
}

for (const name of ["mutate", "validate", "validate-credspec"]) {
  app.http(name, { route: name, methods: ["POST"], authLevel: "anonymous", handler: answer });
}
