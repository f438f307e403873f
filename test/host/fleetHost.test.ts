import { request } from "node:https";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall, type ClientReply } from "../support/httpsClient.js";
import { startLocalFleetWebhook, type LocalFleetWebhook } from "../support/localWebhook.js";
import { pod, podNaming, review } from "../support/reviews.js";

interface Context {
  alpha: FakeApiServer;
  beta: FakeApiServer;
  webhook: LocalFleetWebhook;
}

const secrets = { alpha: "alpha-secret-".padEnd(40, "a"), beta: "beta-secret-0123456789".padEnd(40, "b") };
const specName = "webapp1-credspec";
// The same name in both clusters, with contents of its own in each.
function contentsIn(cluster: string): Record<string, unknown> {
  const credspec = credSpecFixture(specName).credspec ?? {};
  const domain = typeof credspec.DomainJoinConfig === "object" ? credspec.DomainJoinConfig : {};
  return { ...credspec, DomainJoinConfig: { ...domain, DnsName: `${cluster}.contoso.com` } };
}

const Fleet = suite<Context>("the local host serving a fleet of two clusters");

Fleet.before(async (context) => {
  context.alpha = await startFakeApiServer();
  context.beta = await startFakeApiServer();
  context.webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: context.alpha.kubeconfig }, beta: { kubeconfig: context.beta.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    // The fakes serve single reads: the direct path, without caches.
    GMSA_CREDSPEC_CACHE: "false",
    GMSA_AUTH_CACHE_TTL_SECONDS: "0",
    GMSA_API_CONCURRENCY: "1",
    GMSA_API_TIMEOUT_MS: "2000",
  });
});

Fleet.before.each((context) => {
  for (const [name, api] of [
    ["alpha", context.alpha],
    ["beta", context.beta],
  ] as const) {
    const object = { ...credSpecFixture(specName), credspec: contentsIn(name) };
    api.state.credSpecs = new Map([[specName, object as unknown as Record<string, unknown>]]);
    api.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
    api.state.delayMs = undefined;
    api.calls.length = 0;
  }
  context.webhook.logs.length = 0;
});

Fleet.after(async (context) => {
  await context.webhook.close();
  await context.alpha.close();
  await context.beta.close();
});

function post(context: Context, path: string, headers: Record<string, string> = {}, body: unknown = review("CREATE", podNaming(specName))): Promise<ClientReply> {
  return httpsCall(`${context.webhook.server.url}${path}`, { ca: context.webhook.caPem, headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
}

function inlined(reply: ClientReply): unknown {
  assert.is(reply.status, 200, reply.text);
  const response = JSON.parse(reply.text).response;
  assert.ok(response.patch, `a patch: ${reply.text}`);
  return JSON.parse(JSON.parse(Buffer.from(response.patch, "base64").toString())[0].value);
}

Fleet("each cluster's pods get that cluster's credential spec, by header or by path", async (context) => {
  const a = await post(context, "/clusters/alpha/mutate", { "x-gmsa-cluster-secret": secrets.alpha });
  const b = await post(context, `/clusters/beta/${secrets.beta}/mutate`);
  assert.equal(inlined(a), JSON.parse(canonicalJson(contentsIn("alpha"))));
  assert.equal(inlined(b), JSON.parse(canonicalJson(contentsIn("beta"))));
  assert.ok(context.alpha.calls.length > 0 && context.beta.calls.length > 0);
});

Fleet("one cluster's RBAC never answers for the other", async (context) => {
  context.beta.state.grants.clear();
  const allowed = await post(context, `/clusters/alpha/${secrets.alpha}/validate`);
  const refused = await post(context, `/clusters/beta/${secrets.beta}/validate`);
  assert.is(JSON.parse(allowed.text).response.allowed, true);
  assert.is(JSON.parse(refused.text).response.status.code, 403);
  assert.ok(context.beta.calls.every((c) => c.path.endsWith("localsubjectaccessreviews")));
});

Fleet("every admission line names its cluster", async (context) => {
  await post(context, `/clusters/beta/${secrets.beta}/validate`);
  const lines = context.webhook.logs.filter((l) => l.includes('"event":"gmsa.admission"'));
  assert.is(lines.length, 1);
  assert.match(lines[0]!, '"cluster":"beta"');
});

const refusals: Array<[string, string, Record<string, string>, number, string, RegExp | undefined]> = [
  [
    "an unknown cluster",
    "/clusters/gamma/mutate",
    { "x-gmsa-cluster-secret": secrets.alpha },
    404,
    "no such cluster",
    /"event":"gmsa.requestRefused","cluster":"gamma","webhook":"mutate","status":404/,
  ],
  [
    "an unknown cluster by path",
    `/clusters/gamma/${secrets.alpha}/mutate`,
    {},
    404,
    "no such cluster",
    /"event":"gmsa.requestRefused","cluster":"gamma","webhook":"mutate","status":404/,
  ],
  ["today's paths, in fleet mode", "/mutate", {}, 404, "this app serves a fleet", /"event":"gmsa.requestRefused","cluster":"default","webhook":"mutate","status":404/],
  ["no secret", "/clusters/alpha/mutate", {}, 401, "a cluster secret is required", /"cluster":"alpha"/],
  ["a wrong secret", "/clusters/alpha/mutate", { "x-gmsa-cluster-secret": "x".repeat(40) }, 401, "the cluster secret does not match", /"cluster":"alpha".*matches no member/],
  ["the other member's secret", `/clusters/alpha/${secrets.beta}/validate`, {}, 401, "the cluster secret does not match", /request for \\"alpha\\" carried \\"beta\\"'s secret/],
  [
    "a secret sent in the header to the path route",
    "/clusters/alpha/x/mutate",
    { "x-gmsa-cluster-secret": secrets.alpha },
    401,
    "the cluster secret does not match",
    /"cluster":"alpha"/,
  ],
];

for (const [what, path, headers, status, message, warning] of refusals) {
  Fleet(`${what} is answered ${status} without asking either cluster`, async (context) => {
    const reply = await post(context, path, headers);
    assert.is(reply.status, status);
    assert.match(reply.text, message);
    assert.is(context.alpha.calls.length + context.beta.calls.length, 0);
    const warned = context.webhook.logs.filter((l) => l.startsWith("warning"));
    // Every refusal is counted: one warning line, the router's own or a gmsa.requestRefused one.
    assert.is(warned.length, 1, JSON.stringify(warned));
    if (warning)
      assert.ok(
        warned.some((l) => warning.test(l)),
        JSON.stringify(warned),
      );
    for (const secret of Object.values(secrets)) assert.not.match(`${reply.text}${context.webhook.logs.join("")}`, secret);
  });
}

Fleet("an unknown cluster is answered before its body arrives", async (context) => {
  const url = new URL(`${context.webhook.server.url}/clusters/gamma/mutate`);
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(url, { method: "POST", ca: context.webhook.caPem, headers: { "content-type": "application/json", "content-length": "1000000" } }, (res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      req.destroy();
    });
    req.on("error", (error) => (req.destroyed ? undefined : reject(error)));
    // A few bytes of a million: an answer can only come if nobody waits for the rest.
    req.write("{");
  });
  assert.is(status, 404);
});

Fleet("a slow cluster holding its only API slot does not hold up the other", async (context) => {
  context.alpha.state.delayMs = 1500;
  const order: string[] = [];
  const slow = post(context, `/clusters/alpha/${secrets.alpha}/validate`).then(() => order.push("alpha"));
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = performance.now();
  await post(context, `/clusters/beta/${secrets.beta}/validate`).then(() => order.push("beta"));
  const betaMs = performance.now() - started;
  await slow;
  assert.equal(order, ["beta", "alpha"]);
  console.log(`    beta answered in ${betaMs.toFixed(1)} ms while alpha's API server took 1500 ms per call`);
});

Fleet("/metrics reports each member, never a secret", async (context) => {
  await post(context, `/clusters/alpha/${secrets.alpha}/validate`);
  const reply = await httpsCall(`${context.webhook.server.url}/metrics`, { ca: context.webhook.caPem, method: "GET" });
  assert.is(reply.status, 200);
  const metrics = JSON.parse(reply.text);
  assert.is(metrics.mode, "fleet");
  assert.equal(Object.keys(metrics.clusters), ["alpha", "beta"]);
  assert.is(metrics.clusters.alpha.state, "started");
  assert.ok(metrics.clusters.alpha.admissions >= 1);
  assert.type(metrics.clusters.alpha.lastAdmissionAt, "string");
  for (const secret of Object.values(secrets)) assert.not.match(reply.text, secret);
  assert.not.match(reply.text, context.alpha.kubeconfig);
});

Fleet.run();

const Health = suite<{ alpha: FakeApiServer; webhook: LocalFleetWebhook }>("/health of a fleet");

Health("is ok without starting any member's client", async (context) => {
  context.alpha = await startFakeApiServer();
  context.webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: context.alpha.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
  });
  try {
    const reply = await httpsCall(`${context.webhook.server.url}/health`, { ca: context.webhook.caPem, method: "GET" });
    assert.equal({ status: reply.status, body: JSON.parse(reply.text) }, { status: 200, body: { status: "ok" } });
    assert.is(context.webhook.runtime.members.get("alpha")!.status().state, "idle");
    assert.is(context.alpha.calls.length, 0);
  } finally {
    await context.webhook.close();
    await context.alpha.close();
  }
});

Health("is 200 degraded, naming no member, while a member is kept out of service; /metrics says which and why", async (context) => {
  context.alpha = await startFakeApiServer();
  context.webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: context.alpha.kubeconfig }, "new-member": { kubeconfig: context.alpha.kubeconfig, context: "typo" } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_NEW_MEMBER: "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/new-member/)",
    GMSA_CREDSPEC_CACHE: "false",
  });
  try {
    const reply = await httpsCall(`${context.webhook.server.url}/health`, { ca: context.webhook.caPem, method: "GET" });
    assert.equal({ status: reply.status, body: JSON.parse(reply.text) }, { status: 200, body: { status: "degraded" } });
    const metrics = JSON.parse((await httpsCall(`${context.webhook.server.url}/metrics`, { ca: context.webhook.caPem, method: "GET" })).text);
    assert.is(metrics.clustersUnavailable, 1);
    assert.is(metrics.clusters["new-member"].state, "unavailable");
    assert.match(metrics.clusters["new-member"].reason, /^GMSA_CLUSTER_SECRET_NEW_MEMBER is a Key Vault reference the platform could not resolve/);
    assert.is(metrics.clusters.alpha.state, "idle");
    for (const secret of Object.values(secrets)) assert.not.match(JSON.stringify(metrics), secret);
    // Its requests: 503 in plain words, without its body being read; alpha is served.
    const refused = await httpsCall(`${context.webhook.server.url}/clusters/new-member/mutate`, {
      ca: context.webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", pod())),
    });
    assert.is(refused.status, 503);
    assert.match(refused.text, /^this cluster is not served at the moment: .*correlation ID/);
    assert.not.match(refused.text, "Key Vault");
    const correlationId = /correlation ID ([0-9a-f-]{36})/.exec(refused.text)![1]!;
    assert.ok(
      context.webhook.logs.some((line) => line.startsWith("warning") && line.includes(correlationId) && line.includes("Key Vault reference")),
      JSON.stringify(context.webhook.logs),
    );
    assert.ok(
      context.webhook.logs.some(
        (line) => line.startsWith("warning") && line.includes('"event":"gmsa.clusterUnavailable","cluster":"new-member"') && !line.includes("correlationId"),
      ),
      "the start-up line",
    );
    const served = await httpsCall(`${context.webhook.server.url}/clusters/alpha/${secrets.alpha}/mutate`, {
      ca: context.webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", pod())),
    });
    assert.is(served.status, 200, served.text);
  } finally {
    await context.webhook.close();
    await context.alpha.close();
  }
});

Health.run();
