import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { podWebhook } from "../../../lib/gmsa/podWebhook.js";
import { handleReview } from "../../../lib/admission/handleReview.js";
import { expandCredSpecs } from "../../../lib/gmsa/expandCredSpecs.js";
import { portsFor } from "../../../lib/kube/clusterClient.js";
import { aksServerScope } from "../../../lib/kube/entraAccess.js";
import { entraApiAccess } from "../../../lib/kube/entraApiAccess.js";
import { managedIdentityCredential } from "../../../lib/kube/refreshableCredential.js";
import { readAdmissionSettings } from "../../../lib/settings/admission.js";
import { cachingCredential, fakeCredential } from "../../support/fakeCredential.js";
import { fakePorts } from "../../support/fakePorts.js";
import { startFakeApiServer, type FakeApiServer } from "../../support/fakeApiServer.js";
import { gmsa, pod, review } from "../../support/reviews.js";
import type { TokenCredential } from "@azure/core-auth";

/**
 * How admissions recover when the identity misbehaves: a token fetch that hangs must not stall
 * the instance, and a token the API server refuses must be replaced by a new one, not by the
 * credential's cached copy of the same.
 */

const hour = 3_600_000;
const credSpecName = "webapp1-credspec";

/** An API server that serves one credential spec to the bearer tokens it accepts, and 401 to the rest. */
async function startTokenCheckingServer(accepted: readonly string[]): Promise<FakeApiServer> {
  const server = await startFakeApiServer();
  server.state.acceptTokens = new Set(accepted);
  server.addCredSpec(credSpecName, {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    credspec: { CmsPlugins: ["ActiveDirectory"], ActiveDirectoryConfig: { GroupManagedServiceAccounts: [{ Name: "WebApp1", Scope: "CONTOSO" }] } },
  });
  return server;
}

/** The bearer tokens presented to the server, in order. */
function presented(server: FakeApiServer): string[] {
  return server.calls.map((call) => (call.authorization ?? "").replace(/^Bearer /, ""));
}

interface Admitter {
  /** One mutating admission of a pod that names the credential spec: its code, and how long it took. */
  admit(): Promise<{ code: number; patched: boolean; elapsedMs: number }>;
}

async function admitterFor(server: FakeApiServer, credential: TokenCredential, options: { tokenTimeoutMs?: number; prefetchToken?: boolean; budgetMs: number }): Promise<Admitter> {
  const kc = await entraApiAccess({
    credential,
    server: server.url,
    caPem: server.caPem,
    ...(options.tokenTimeoutMs !== undefined ? { tokenTimeoutMs: options.tokenTimeoutMs } : {}),
    ...(options.prefetchToken !== undefined ? { prefetchToken: options.prefetchToken } : {}),
    log: () => undefined,
  });
  const settings = readAdmissionSettings({ GMSA_API_SERVER_URL: server.url, GMSA_CREDSPEC_CACHE: "false", GMSA_AUTH_CACHE_TTL_SECONDS: "0" });
  const ports = portsFor(kc, settings, () => undefined);
  // Authorization is not what these tests are about: everyone may use everything.
  const allowAll = fakePorts();
  return {
    async admit() {
      const p = pod();
      p.spec.containers[0]!.securityContext = gmsa(credSpecName);
      const started = Date.now();
      const outcome = await handleReview(review("CREATE", p), podWebhook(expandCredSpecs), {
        credSpecs: ports.credSpecs,
        authorizer: allowAll.authorizer,
        settings: allowAll.settings,
        budgetMs: options.budgetMs,
      });
      const elapsedMs = Date.now() - started;
      if (outcome.kind !== "reviewed") throw new Error(outcome.message);
      const response = outcome.review.response;
      return { code: response.status?.code ?? 200, patched: response.patch !== undefined, elapsedMs };
    },
  };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const Recovery = suite("admissions when the identity misbehaves");

Recovery("a hung identity endpoint: admissions fail within budget, the next need after the timeout asks again, and admissions recover", async () => {
  const server = await startTokenCheckingServer(["good-token"]);
  try {
    // The first call to the credential never answers and ignores its abort signal.
    const credential = fakeCredential([{ hang: true }, { token: "good-token", lifetimeMs: hour }]);
    const admitter = await admitterFor(server, credential, { tokenTimeoutMs: 400, prefetchToken: false, budgetMs: 250 });

    const first = await admitter.admit();
    assert.is(first.code, 504, "refused while the token fetch hangs");
    assert.ok(first.elapsedMs < 1500, `answered after ${first.elapsedMs} ms`);
    assert.is(credential.calls.length, 1);

    // Past the token fetch timeout, the hung call is dropped: the next admission asks again.
    await pause(450);
    const later = await admitter.admit();
    assert.is(credential.calls.length, 2, "a new call to the credential");
    assert.is(later.code, 200);
    assert.ok(later.patched, "the credential spec was inlined");
    assert.equal(presented(server), ["good-token"]);
  } finally {
    await server.close();
  }
});

Recovery("a refused token: the retry presents a new token, not the credential's cached copy", async () => {
  const server = await startTokenCheckingServer(["fresh-token"]);
  try {
    const credential = cachingCredential([
      { token: "refused-token", lifetimeMs: hour },
      { token: "fresh-token", lifetimeMs: hour },
    ]);
    const admitter = await admitterFor(server, credential, { budgetMs: 3000 });
    const answer = await admitter.admit();
    assert.equal(presented(server), ["refused-token", "fresh-token"]);
    assert.is(answer.code, 200);
    assert.ok(answer.patched);
    assert.equal(
      credential.calls.map((c) => c.fresh),
      [false, true],
      "the second token came from past the credential's cache",
    );
  } finally {
    await server.close();
  }
});

Recovery.run();

// ---------------------------------------------------------------------------------------------
// The production credential against a stand-in for the App Service identity endpoint: MSAL
// caches the token process-wide, and only the fresh path asks the endpoint again.

const Identity = suite("managed identity: fresh tokens past MSAL's cache");

Identity("getToken is served from MSAL's cache; getFreshToken asks the endpoint, and later calls get the new token", async () => {
  let issued = 0;
  const requests: Array<{ resource: string | null; clientId: string | null; header: string | undefined }> = [];
  const endpoint = http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    requests.push({ resource: url.searchParams.get("resource"), clientId: url.searchParams.get("client_id"), header: request.headers["x-identity-header"] as string | undefined });
    issued += 1;
    response.writeHead(200, { "content-type": "application/json" });
    response.end(
      JSON.stringify({
        access_token: `mi-token-${issued}`,
        expires_on: String(Math.floor(Date.now() / 1000) + 3600),
        resource: url.searchParams.get("resource"),
        token_type: "Bearer",
        client_id: url.searchParams.get("client_id"),
      }),
    );
  });
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  const saved = { endpoint: process.env.IDENTITY_ENDPOINT, header: process.env.IDENTITY_HEADER };
  process.env.IDENTITY_ENDPOINT = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/msi/token`;
  process.env.IDENTITY_HEADER = "identity-header-secret";
  try {
    const clientId = "11111111-2222-3333-4444-555555555555";
    const credential = managedIdentityCredential(clientId, { IDENTITY_ENDPOINT: process.env.IDENTITY_ENDPOINT, IDENTITY_HEADER: "identity-header-secret" });
    assert.is((await credential.getToken(aksServerScope))?.token, "mi-token-1");
    assert.is((await credential.getToken(aksServerScope))?.token, "mi-token-1", "MSAL's cache answers");
    assert.is(issued, 1);
    assert.is((await credential.getFreshToken(aksServerScope))?.token, "mi-token-2", "past the cache");
    assert.is(issued, 2);
    assert.is((await credential.getToken(aksServerScope))?.token, "mi-token-2", "the cache now holds the new token");
    assert.equal(requests[1], { resource: "6dae42f8-4368-4678-94ff-3960e28e3630", clientId, header: "identity-header-secret" });
  } finally {
    if (saved.endpoint === undefined) delete process.env.IDENTITY_ENDPOINT;
    else process.env.IDENTITY_ENDPOINT = saved.endpoint;
    if (saved.header === undefined) delete process.env.IDENTITY_HEADER;
    else process.env.IDENTITY_HEADER = saved.header;
    endpoint.closeAllConnections();
    await new Promise<void>((resolve) => endpoint.close(() => resolve()));
  }
});

Identity.run();
