import { suite } from "uvu";
import * as assert from "uvu/assert";
import { classifyReadiness } from "../../cluster/readiness.js";

/**
 * How the readiness check reads the API server's answer to its dry run, for the failures the e2e
 * suite cannot stage (the messages as kube-apiserver words them).
 */
const Classify = suite("the readiness check's reading of an answer");
const spec = "gmsa-admission-readiness-0123456789ab";
const failedCall = (why: string) => ({
  status: 500,
  body: {
    kind: "Status",
    message: `Internal error occurred: failed calling webhook "mutate.gmsa-admission.windows.k8s.io": failed to call webhook: Post "https://relay.gmsa-admission.svc:443/mutate?timeout=5s": ${why}`,
  },
});

Classify("each way the API server fails to call the webhook is told apart", () => {
  const cases: Array<[string, RegExp]> = [
    ["tls: failed to verify certificate: x509: certificate signed by unknown authority", /TLS certificate is not trusted/],
    ["context deadline exceeded", /timed out/],
    ["net/http: request canceled (Client.Timeout exceeded while awaiting headers)", /timed out/],
    ["dial tcp 10.0.0.12:443: connect: connection refused", /cannot be reached from the API server/],
    ["dial tcp: lookup relay.gmsa-admission.svc on 10.0.0.10:53: no such host", /cannot be reached from the API server/],
  ];
  for (const [why, expected] of cases) {
    const result = classifyReadiness(failedCall(why), spec);
    assert.is(result.hop, "apiServerToWebhook", why);
    assert.match(result.summary, expected, why);
  }
  const refusedKey = classifyReadiness(
    {
      status: 500,
      body: { message: 'failed calling webhook "validate.gmsa-admission.windows.k8s.io": the server responded with the status code 401 but did not return more information' },
    },
    spec,
  );
  assert.match(refusedKey.summary, /refused the call with 401/);
  // How kube-apiserver 1.37 words it (seen in test/e2e/relay.test.ts with a wrong function key).
  const refusedKeyAsWorded = classifyReadiness(
    {
      status: 500,
      body: {
        message:
          'Internal error occurred: failed calling webhook "mutate.gmsa-admission.windows.k8s.io": failed to call webhook: the server has asked for the client to provide credentials',
      },
    },
    spec,
  );
  assert.match(refusedKeyAsWorded.summary, /refused the call with 401/);
  const noFunction = classifyReadiness(
    { status: 500, body: { message: 'failed calling webhook "validate.gmsa-admission.windows.k8s.io": the server could not find the requested resource (404)' } },
    spec,
  );
  assert.match(noFunction.summary, /nothing answers at the webhook's path/);
});

Classify("only the product's own refusal of the random name is ready; another webhook's refusal is not", () => {
  const ours = classifyReadiness(
    {
      status: 403,
      body: {
        message: `admission webhook "validate.gmsa-admission.windows.k8s.io" denied the request: pod "gmsa-admission-readiness-" (name to be generated): service account "default" in namespace "default" is not authorized to use GMSACredentialSpec "${spec}"; if the name is right, to grant it: ...`,
      },
    },
    spec,
  );
  assert.is(ours.hop, "ready");
  const wildcard = classifyReadiness(
    { status: 422, body: { message: `admission webhook "validate.gmsa-admission.windows.k8s.io" denied the request: pod "x": GMSACredentialSpec "${spec}" does not exist` } },
    spec,
  );
  assert.is(wildcard.hop, "ready", "where RBAC lets every account use every spec, the 422 proves the path too");
  const other = classifyReadiness(
    { status: 403, body: { message: `admission webhook "gmsa.windows.k8s.io" denied the request: service account is not authorized to use gmsa cred spec ${spec}` } },
    spec,
  );
  assert.is.not(other.hop, "ready", "the upstream webhook or the AKS add-on answering proves nothing about this product");
  const stale = classifyReadiness(
    { status: 403, body: { message: 'admission webhook "validate.gmsa-admission.windows.k8s.io" denied the request: ... is not authorized to use GMSACredentialSpec "another"' } },
    spec,
  );
  assert.is(stale.hop, "unexpected");
  assert.is(classifyReadiness({ status: 201, body: { kind: "Pod" } }, spec).hop, "webhooksDidNotRun");
  assert.is(classifyReadiness({ status: 403, body: { message: 'pods "x" is forbidden: User "ci" cannot create resource "pods"' } }, spec).hop, "unexpected");
});

Classify("a namespace or service account that does not exist is the check's own input, not a hop", () => {
  const namespace = classifyReadiness({ status: 404, body: { kind: "Status", message: 'namespaces "nope" not found', reason: "NotFound" } }, spec);
  assert.is(namespace.hop, "checkInput");
  assert.match(namespace.summary, /--check-namespace/);
  const account = classifyReadiness(
    { status: 403, body: { message: 'pods "gmsa-admission-readiness-" is forbidden: error looking up service account apps/ghost: serviceaccount "ghost" not found' } },
    spec,
  );
  assert.is(account.hop, "checkInput");
  assert.match(account.summary, /--check-service-account/);
});

Classify.run();
