import * as https from "node:https";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { podWebhook, type PodPorts } from "../../../lib/gmsa/podWebhook.js";
import { createCertificateAuthority, issueCertificate } from "../../../controlplane/pki.js";
import { handleReview, type ReviewBudget } from "../../../lib/admission/handleReview.js";
import { type CredSpecSource } from "../../../lib/gmsa/ports.js";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { portsFor } from "../../../lib/kube/clusterClient.js";
import { entraApiAccess } from "../../../lib/kube/entraApiAccess.js";
import { admissionLogLine } from "../../../lib/observability/admissionLog.js";
import { readAdmissionSettings } from "../../../lib/settings/admission.js";
import { fakeCredential } from "../../support/fakeCredential.js";
import { fakePorts } from "../../support/fakePorts.js";
import { gmsa, pod, review } from "../../support/reviews.js";

/**
 * Whoever may create a pod reads the refusal through kubectl. When the webhook itself fails,
 * that message must say what kind of failure it was and give a correlation ID, while the
 * details (host names, addresses, ports, certificate and identity errors) go to the log line
 * under the same ID.
 */

const privateHost = "aks-prod-7f3a9c.privatelink.westeurope.azmk8s.io";
const identityError =
  "ManagedIdentityCredential: Authentication failed. Message Attempted to use the IMDS endpoint at http://169.254.169.254/metadata/identity/oauth2/token, but it returned 400 (identity not found for client 3f1e…)";

function gmsaPod() {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  return p;
}

interface Told {
  readonly code: number;
  readonly message: string;
  readonly correlationId: string;
  readonly logLine: string;
}

async function admit(credSpecs: CredSpecSource, budgetMs = 3000): Promise<Told> {
  const ports = fakePorts();
  const deps: PodPorts & ReviewBudget = { credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs };
  const outcome = await handleReview(review("CREATE", gmsaPod()), podWebhook(validatePod), deps);
  if (outcome.kind !== "reviewed") throw new Error(outcome.message);
  const status = outcome.review.response.status;
  assert.is(outcome.review.response.allowed, false);
  const logLine = admissionLogLine({ ...outcome.record, cluster: "default", webhook: "validate", latencyMs: 1, coldStart: false });
  return { code: status?.code ?? 0, message: status?.message ?? "", correlationId: outcome.record.correlationId, logLine };
}

function failingWith(error: unknown): CredSpecSource {
  return {
    lookup: async () => {
      throw error;
    },
  };
}

/** The message is plain, names the ID, and leaks none of the internals; the log line has them all, and the same ID. */
function assertToldPlainly(told: Told, internals: readonly string[], plainWords: string | RegExp): void {
  assert.match(told.correlationId, /^[0-9a-f-]{36}$/, "a correlation ID is made");
  assert.match(told.message, `correlation ID ${told.correlationId}`);
  assert.match(told.message, plainWords);
  for (const internal of internals) assert.not.match(told.message, internal, `the pod creator is not told "${internal}"`);
  const logged: unknown = JSON.parse(told.logLine);
  assert.ok(typeof logged === "object" && logged !== null);
  const fields = logged as Record<string, unknown>;
  assert.is(fields.correlationId, told.correlationId, "the log line carries the same ID");
  for (const internal of internals) assert.match(String(fields.detail), internal, `the log line carries "${internal}"`);
}

const Told = suite("what a pod creator is told when the webhook fails");

const clusterFailures: Array<[string, ClusterUnavailableError, number, readonly string[], RegExp]> = [
  [
    "a private API server name that does not resolve",
    new ClusterUnavailableError(
      `the Kubernetes API server could not be reached for GET gmsacredentialspecs/webapp1-credspec: request to https://${privateHost}:443/apis failed, reason: getaddrinfo ENOTFOUND ${privateHost}`,
      "unreachable",
    ),
    503,
    [privateHost, "ENOTFOUND", "getaddrinfo"],
    /the Kubernetes API server could not be reached/,
  ],
  [
    "a loopback address and port that refuse connections",
    new ClusterUnavailableError("the Kubernetes API server could not be reached for GET gmsacredentialspecs/webapp1-credspec: connect ECONNREFUSED 127.0.0.1:16443", "unreachable"),
    503,
    ["127.0.0.1", "16443", "ECONNREFUSED"],
    /could not be reached/,
  ],
  [
    "a certificate that does not match",
    new ClusterUnavailableError(
      `the Kubernetes API server could not be reached for GET gmsacredentialspecs/webapp1-credspec: Hostname/IP does not match certificate's altnames: Host: ${privateHost}. is not in the cert's altnames: DNS:hcp-internal`,
      "unreachable",
    ),
    503,
    [privateHost, "certificate", "altnames", "hcp-internal"],
    /could not be reached/,
  ],
  [
    "an identity library's error",
    new ClusterUnavailableError(
      `no Microsoft Entra token for the Kubernetes API server, for GET gmsacredentialspecs/webapp1-credspec: could not get a Microsoft Entra token for the AKS API server (scope 6dae42f8-4368-4678-94ff-3960e28e3630/.default): ${identityError}`,
      "rejected",
    ),
    503,
    ["ManagedIdentityCredential", "169.254.169.254", "IMDS", "6dae42f8-4368-4678-94ff-3960e28e3630"],
    /the webhook's own access to the cluster failed/,
  ],
  [
    "a timeout that names the server",
    new ClusterUnavailableError(
      `the Kubernetes API server did not answer GET https://${privateHost}/apis/windows.k8s.io/v1/gmsacredentialspecs/webapp1-credspec in time`,
      "timeout",
    ),
    504,
    [privateHost, "/apis/windows.k8s.io"],
    /the Kubernetes API server did not answer in time/,
  ],
  [
    "a server error",
    new ClusterUnavailableError(`the Kubernetes API server ${privateHost} answered 500 to GET gmsacredentialspecs/webapp1-credspec`, "serverError", 500),
    503,
    [privateHost],
    /the Kubernetes API server answered with an error \(HTTP 500\)/,
  ],
];

for (const [what, error, code, internals, plainWords] of clusterFailures) {
  Told(`${what}: plain words and a correlation ID; the details only in the log line`, async () => {
    const told = await admit(failingWith(error));
    assert.is(told.code, code);
    assertToldPlainly(told, internals, plainWords);
  });
}

Told("an unexpected failure: the same, with the error's text only in the log", async () => {
  const original = console.error;
  console.error = () => undefined;
  try {
    const told = await admit(failingWith(new TypeError(`cannot read properties of undefined (reading 'spec') at ${privateHost}`)));
    assert.is(told.code, 500);
    assertToldPlainly(told, [privateHost, "TypeError"], /failed unexpectedly/);
  } finally {
    console.error = original;
  }
});

Told("each failure gets its own correlation ID", async () => {
  const error = new ClusterUnavailableError("connect ECONNREFUSED 127.0.0.1:1", "unreachable");
  const first = await admit(failingWith(error));
  const second = await admit(failingWith(error));
  assert.is.not(first.correlationId, second.correlationId);
});

Told("an admission that succeeds has no correlation ID and no detail in its log line", async () => {
  const ports = fakePorts();
  const outcome = await handleReview(review("CREATE", gmsaPod()), podWebhook(validatePod), {
    credSpecs: ports.credSpecs,
    authorizer: ports.authorizer,
    settings: ports.settings,
    budgetMs: 3000,
  });
  if (outcome.kind !== "reviewed") throw new Error(outcome.message);
  assert.is(outcome.review.response.allowed, true);
  assert.is(outcome.record.correlationId, "");
  assert.is(outcome.record.detail, "");
});

Told.run();

// ---------------------------------------------------------------------------------------------
// The same through the product's real Kubernetes client, with the errors Node and the client
// library really produce.

const RealClient = suite("what a pod creator is told, through the real client");

const hour = 3_600_000;

async function realCredSpecs(server: string, caPem: string, credential = fakeCredential([{ token: "some-token", lifetimeMs: hour }])): Promise<CredSpecSource> {
  const kc = await entraApiAccess({ credential, server, caPem, prefetchToken: false });
  const settings = readAdmissionSettings({ GMSA_API_SERVER_URL: server, GMSA_CREDSPEC_CACHE: "false", GMSA_AUTH_CACHE_TTL_SECONDS: "0" });
  return portsFor(kc, settings, () => undefined).credSpecs;
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

RealClient("a loopback port that refuses connections", async () => {
  const ca = await createCertificateAuthority("unused-ca");
  const port = await closedPort();
  const told = await admit(await realCredSpecs(`https://127.0.0.1:${port}`, ca.certPem));
  assert.is(told.code, 503);
  assertToldPlainly(told, ["127.0.0.1", String(port)], /could not be reached/);
});

RealClient("a server whose certificate the CA did not sign", async () => {
  const servingCa = await createCertificateAuthority("serving-ca");
  const otherCa = await createCertificateAuthority("other-ca");
  const serving = await issueCertificate(servingCa, { commonName: "not-the-cluster", ipAddresses: ["127.0.0.1"], usage: "server" });
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_request, response) => response.end("{}"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    const told = await admit(await realCredSpecs(`https://127.0.0.1:${port}`, otherCa.certPem));
    assert.is(told.code, 503);
    assertToldPlainly(told, ["certificate"], /could not be reached/);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

RealClient("an identity that cannot give a token", async () => {
  const ca = await createCertificateAuthority("unused-ca-2");
  const port = await closedPort();
  const credential = fakeCredential([{ fail: identityError }]);
  const told = await admit(await realCredSpecs(`https://127.0.0.1:${port}`, ca.certPem, credential));
  assert.is(told.code, 503);
  assertToldPlainly(told, ["ManagedIdentityCredential", "169.254.169.254"], /the webhook's own access to the cluster failed/);
});

RealClient.run();
