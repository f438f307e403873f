// The least any Node admission webhook does, for `npm run bench` to compare against: one HTTPS
// server that reads the whole AdmissionReview body, parses it, and answers a fixed
// AdmissionReview (the request's UID, a fixed JSON patch). No policy, no cluster, no logging.
"use strict";
const { createServer } = require("node:https");
const { readFileSync } = require("node:fs");

const [certFile, keyFile] = process.argv.slice(2);
const patch = Buffer.from(JSON.stringify([{ op: "add", path: "/spec/securityContext/windowsOptions/gmsaCredentialSpec", value: "{}" }])).toString("base64");

const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const body = JSON.stringify({
      apiVersion: review.apiVersion,
      kind: "AdmissionReview",
      response: { uid: review.request.uid, allowed: true, patchType: "JSONPatch", patch },
    });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body);
  });
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`floor ready at https://127.0.0.1:${server.address().port}\n`));
process.once("SIGTERM", () => process.exit(0));
