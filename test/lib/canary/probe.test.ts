import { suite } from "uvu";
import * as assert from "uvu/assert";
import { classifyReadiness } from "../../../lib/canary/probe.js";

/** The API server's words when it could not call a webhook, read into the hop that failed. */
const Probe = suite("classifyReadiness: the API server could not call the webhook");

const failed = (why: string) => ({
  status: 500,
  body: {
    kind: "Status",
    code: 500,
    message: `Internal error occurred: failed calling webhook "mutate.gmsa-admission.windows.k8s.io": failed to call webhook: Post "https://127.0.0.1:8443/mutate?timeout=5s": ${why}`,
  },
});

Probe("a function that is down reads as unreachable, whether refused or gone under a kept connection", () => {
  for (const why of [
    "dial tcp 127.0.0.1:8443: connect: connection refused",
    "EOF",
    "read tcp 127.0.0.1:40000->127.0.0.1:8443: read: connection reset by peer",
    "http: server closed idle connection",
    "write tcp 127.0.0.1:40000->127.0.0.1:8443: write: broken pipe",
  ]) {
    const result = classifyReadiness(failed(why), "no-such-spec");
    assert.is(result.hop, "apiServerToWebhook", why);
    assert.match(result.summary, /cannot be reached from the API server/, why);
  }
});

Probe("other failures keep their own reading", () => {
  const cases: Array<[string, RegExp]> = [
    ["tls: failed to verify certificate: x509: certificate signed by unknown authority", /TLS certificate is not trusted/],
    ["context deadline exceeded (Client.Timeout exceeded while awaiting headers)", /timed out/],
    ["the server has asked for the client to provide credentials", /refused the call with 401/],
    ["the server could not find the requested resource", /nothing answers at the webhook's path/],
  ];
  for (const [why, expected] of cases) assert.match(classifyReadiness(failed(why), "no-such-spec").summary, expected, why);
});

Probe.run();
