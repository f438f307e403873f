import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { instanceCounters } from "../../lib/observability/instanceCounters.js";
import { webhookConfigurationName } from "../../lib/wiring/webhooks.js";
import { servedFor } from "../support/apiServerMetrics.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall, postReview } from "../support/httpsClient.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { gmsa, pod, review } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * The steady state costs the cluster almost nothing: credential specs come from the watch cache,
 * `use` answers from the decision cache. Counted where it matters, at the API server.
 */
const Cache = suite<{ cluster: E2eCluster }>("caches against kube-apiserver");

Cache.before(async (context) => {
  try {
    // Mutate asks `use` before it inlines: a minute of remembered answers lets the last test see
    // the credential spec cache serve on its own while the API server is down.
    context.cluster = await startE2eCluster({ webhookEnv: { GMSA_AUTH_CACHE_TTL_SECONDS: "60" } });
    await context.cluster.apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
      ...useGrant({ name: "use-all", namespace: "apps", group: "system:serviceaccounts:apps" }),
    ]);
  } catch (error) {
    console.error("cache test set-up failed:", error);
    throw error;
  }
});

Cache.after(async (context) => {
  await context.cluster?.close();
});

function gmsaReview(spec: string, serviceAccountName: string) {
  const p = pod({ serviceAccountName });
  p.spec.containers[0]!.securityContext = gmsa(spec);
  return review("CREATE", p);
}

async function admit(cluster: E2eCluster, path: "/mutate" | "/validate", body: unknown) {
  const reply = await postReview(`${cluster.webhook.server.url}${path}`, cluster.webhook.caPem, body);
  return JSON.parse(reply.text).response;
}

const specs = ["webapp1-credspec", "payroll-gmsa"];
const accounts = ["web", "batch"];

Cache("after warm-up, 1 000 mutate and 1 000 validate requests cost a handful of API calls", async ({ cluster }) => {
  for (const spec of specs) for (const account of accounts) await admit(cluster, "/validate", gmsaReview(spec, account));
  await new Promise((r) => setTimeout(r, 500)); // let the first list arrive
  const before = { specs: await servedFor(cluster, "gmsacredentialspecs"), reviews: await servedFor(cluster, "localsubjectaccessreviews"), calls: instanceCounters.apiCalls };
  const started = Date.now();
  const bodies = Array.from({ length: 2000 }, (_, i) => ({
    path: i % 2 === 0 ? ("/mutate" as const) : ("/validate" as const),
    body: gmsaReview(specs[i % 2]!, accounts[(i >> 1) % 2]!),
  }));
  for (let i = 0; i < bodies.length; i += 20) {
    const answers = await Promise.all(bodies.slice(i, i + 20).map((b) => admit(cluster, b.path, b.body)));
    for (const answer of answers) assert.is(answer.allowed, true, JSON.stringify(answer.status));
  }
  const elapsed = Date.now() - started;
  const after = { specs: await servedFor(cluster, "gmsacredentialspecs"), reviews: await servedFor(cluster, "localsubjectaccessreviews"), calls: instanceCounters.apiCalls };
  const specCalls = after.specs - before.specs;
  const reviewCalls = after.reviews - before.reviews;
  console.log(
    `  2000 admissions in ${elapsed} ms: ${specCalls} credential spec requests and ${reviewCalls} access reviews at the API server, ${after.calls - before.calls} API calls counted by the webhook`,
  );
  // Each (account, spec) answer is asked again once per TTL (5 s) at most.
  const ttlWindows = Math.ceil(elapsed / 5000) + 1;
  assert.ok(specCalls <= 2, `credential spec requests: ${specCalls}`);
  assert.ok(reviewCalls <= specs.length * accounts.length * ttlWindows, `access reviews: ${reviewCalls} in ${elapsed} ms`);
});

Cache("a credential spec changed in the API server is served within 2 s", async ({ cluster }) => {
  await admit(cluster, "/mutate", gmsaReview("webapp1-credspec", "web"));
  const changed = structuredClone(credSpecFixture("webapp1-credspec"));
  (changed.credspec!.DomainJoinConfig as Record<string, unknown>).MachineAccountName = "WebApplication2";
  await cluster.apply([changed as never]);
  const started = Date.now();
  let seen = "";
  while (Date.now() - started < 5000 && !seen.includes("WebApplication2")) {
    const answer = await admit(cluster, "/mutate", gmsaReview("webapp1-credspec", "web"));
    seen = JSON.parse(Buffer.from(answer.patch, "base64").toString())[0].value;
  }
  const elapsed = Date.now() - started;
  assert.is(seen, canonicalJson(changed.credspec));
  assert.ok(elapsed < 2000, `seen after ${elapsed} ms`);
});

Cache("a deleted credential spec is refused, and one created a moment ago is accepted", async ({ cluster }) => {
  const reply = await kubeRequest(cluster.admin, "DELETE", "/apis/windows.k8s.io/v1/gmsacredentialspecs/payroll-gmsa");
  assert.is(reply.status, 200);
  const started = Date.now();
  let answer = await admit(cluster, "/validate", gmsaReview("payroll-gmsa", "web"));
  while (answer.allowed && Date.now() - started < 5000) answer = await admit(cluster, "/validate", gmsaReview("payroll-gmsa", "web"));
  assert.is(answer.status?.code, 422);
  assert.ok(Date.now() - started < 2000, "deletion seen within 2 s");

  const created = await kubeRequest(cluster.admin, "POST", "/apis/windows.k8s.io/v1/gmsacredentialspecs", {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    metadata: { name: "brand-new" },
    credspec: credSpecFixture("webapp1-credspec").credspec,
  });
  assert.is(created.status, 201);
  // `web` may use every spec (use-all): the name must resolve and its contents be inlined.
  const fresh = await admit(cluster, "/mutate", gmsaReview("brand-new", "web"));
  assert.is(fresh.allowed, true, JSON.stringify(fresh.status));
  assert.ok(fresh.patch, "the contents were inlined");
  assert.equal(JSON.parse(Buffer.from(fresh.patch, "base64").toString()), [
    { op: "add", path: "/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec", value: canonicalJson(credSpecFixture("webapp1-credspec").credspec) },
  ]);
});

Cache("a name called unknown is accepted as soon as a spec of that name is created", async ({ cluster }) => {
  const before = await admit(cluster, "/mutate", gmsaReview("created-later", "web"));
  assert.is(before.patch, undefined, "nothing to inline yet");
  for (let i = 0; i < 5; i++) await admit(cluster, "/mutate", gmsaReview("created-later", "web"));
  const created = await kubeRequest(cluster.admin, "POST", "/apis/windows.k8s.io/v1/gmsacredentialspecs", {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    metadata: { name: "created-later" },
    credspec: credSpecFixture("payroll-gmsa").credspec,
  });
  assert.is(created.status, 201);
  // "Not found" is remembered, but the watch forgets it as soon as the spec arrives: no need to
  // wait out the memory.
  const started = Date.now();
  let answer = await admit(cluster, "/mutate", gmsaReview("created-later", "web"));
  while (!answer.patch && Date.now() - started < 5000) answer = await admit(cluster, "/mutate", gmsaReview("created-later", "web"));
  const elapsed = Date.now() - started;
  assert.ok(answer.patch, "the contents were inlined");
  assert.is(JSON.parse(Buffer.from(answer.patch, "base64").toString())[0].value, canonicalJson(credSpecFixture("payroll-gmsa").credspec));
  console.log(`  a spec created after its name was called unknown was inlined after ${elapsed} ms`);
  assert.ok(elapsed < 1000, `inlined after ${elapsed} ms`);
  const validated = await admit(cluster, "/validate", gmsaReview("created-later", "web"));
  assert.is(validated.allowed, true, JSON.stringify(validated.status));
});

Cache("a credential spec larger than admission reads is refused by name, and the cache serves the others", async ({ cluster }) => {
  // Valid contents, and an object past 256 KiB.
  const oversized = {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    metadata: { name: "oversized" },
    credspec: { ...credSpecFixture("webapp1-credspec").credspec, Padding: "x".repeat(300 * 1024) },
  };
  const specsPath = "/apis/windows.k8s.io/v1/gmsacredentialspecs";
  const refused = await kubeRequest(cluster.admin, "POST", specsPath, oversized);
  assert.is(refused.status, 422, "the credential spec webhook refuses it");
  assert.match(JSON.stringify(refused.body), /takes more than 256 KiB as JSON/);
  // Stored while the credential spec webhook was not wired (one stored before the wiring, say).
  const wiringPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${webhookConfigurationName}`;
  const wired = (await kubeRequest(cluster.admin, "GET", wiringPath)).body as {
    metadata: Record<string, unknown>;
    webhooks: Array<{ name: string; rules: Array<{ resources: string[] }> }>;
  };
  const unwired = { ...wired, webhooks: wired.webhooks.filter((w) => !w.rules.some((r) => r.resources.includes("gmsacredentialspecs"))) };
  assert.is(unwired.webhooks.length, wired.webhooks.length - 1);
  assert.is((await kubeRequest(cluster.admin, "PUT", wiringPath, unwired)).status, 200);
  try {
    const since = Date.now();
    let created = await kubeRequest(cluster.admin, "POST", specsPath, oversized);
    // The API server takes up a changed webhook configuration within a moment.
    while (created.status === 422 && Date.now() - since < 5000) {
      await new Promise((r) => setTimeout(r, 100));
      created = await kubeRequest(cluster.admin, "POST", specsPath, oversized);
    }
    assert.is(created.status, 201, JSON.stringify(created.body).slice(0, 300));
  } finally {
    const current = (await kubeRequest(cluster.admin, "GET", wiringPath)).body as { metadata: { resourceVersion: string } };
    const restored = await kubeRequest(cluster.admin, "PUT", wiringPath, { ...wired, metadata: { ...wired.metadata, resourceVersion: current.metadata.resourceVersion } });
    assert.is(restored.status, 200);
  }
  const metrics = async () => JSON.parse((await httpsCall(`${cluster.webhook.server.url}/metrics`, { ca: cluster.webhook.caPem, method: "GET" })).text).credSpecCache;
  const started = Date.now();
  let answer = await admit(cluster, "/validate", gmsaReview("oversized", "web"));
  while (answer.allowed && Date.now() - started < 5000) answer = await admit(cluster, "/validate", gmsaReview("oversized", "web"));
  assert.is(answer.status?.code, 422, JSON.stringify(answer.status));
  assert.match(answer.status?.message ?? "", /GMSACredentialSpec "oversized" takes more than 256 KiB as JSON/);
  const mutated = await admit(cluster, "/mutate", gmsaReview("oversized", "web"));
  assert.is(mutated.patch, undefined, "nothing inlined");
  // The watch brought it as a name only: the cache is neither stopped nor reading the API server.
  const status = await metrics();
  assert.equal([status.synced, status.stale, status.overflow], [true, false, false], JSON.stringify(status));
  const specReads = await servedFor(cluster, "gmsacredentialspecs");
  assert.is((await admit(cluster, "/validate", gmsaReview("oversized", "web"))).status?.code, 422);
  const fine = await admit(cluster, "/mutate", gmsaReview("webapp1-credspec", "web"));
  assert.ok(fine.patch, "another spec is still inlined");
  assert.is(await servedFor(cluster, "gmsacredentialspecs"), specReads, "both answered from the cache");
});

Cache("when the watch breaks, the cache keeps serving what it knows and says it is stale", async ({ cluster }) => {
  await admit(cluster, "/mutate", gmsaReview("webapp1-credspec", "web"));
  await cluster.local.stop();
  const health = async () => JSON.parse((await httpsCall(`${cluster.webhook.server.url}/metrics`, { ca: cluster.webhook.caPem, method: "GET" })).text).credSpecCache;
  const started = Date.now();
  while (!(await health()).stale && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 100));
  assert.is((await health()).stale, true, "the cache says it is stale");
  const before = Date.now();
  const answer = await admit(cluster, "/mutate", gmsaReview("webapp1-credspec", "web"));
  assert.is(answer.allowed, true, JSON.stringify(answer.status));
  assert.ok(answer.patch, "still expanded from what the cache knows");
  assert.ok(Date.now() - before < 1000, "without waiting on the API server");
});

Cache.run();
