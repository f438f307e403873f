import { monitorEventLoopDelay } from "node:perf_hooks";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { webhooks } from "../../lib/app/webhooks.js";
import { serveAdmission } from "../../lib/app/serveAdmission.js";
import { stopAdmissionRuntime } from "../../lib/app/runtime.js";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook } from "../support/localWebhook.js";
import { podNaming, review } from "../support/reviews.js";

/**
 * Attack review of the fleet: each test asserts what the fleet should do, and failed while the
 * finding it names was present (the commits that fixed each one say how).
 */
const secrets = { alpha: "alpha-secret-".padEnd(40, "a"), beta: "beta-secret-0123456789".padEnd(40, "b") };
const specName = "webapp1-credspec";

const Findings = suite("attack: fleet findings");

// Careless operator: a copy-pasted access makes one member answer from another member's cluster.
Findings("F1 end to end: beta's wiring, pointed by a copy-paste at alpha's kubeconfig, gets alpha's credential spec contents", async () => {
  const alpha = await startFakeApiServer();
  alpha.state.credSpecs = new Map([
    [
      specName,
      { ...credSpecFixture(specName), credspec: { ...credSpecFixture(specName).credspec, DomainJoinConfig: { DnsName: "alpha-only.contoso.com" } } } as unknown as Record<
        string,
        unknown
      >,
    ],
  ]);
  alpha.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  const webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig }, beta: { kubeconfig: alpha.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    GMSA_CREDSPEC_CACHE: "false",
  });
  try {
    const reply = await httpsCall(`${webhook.server.url}/clusters/beta/${secrets.beta}/mutate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podNaming(specName))),
    });
    const patch = reply.status === 200 ? (JSON.parse(reply.text).response.patch as string | undefined) : undefined;
    const decoded = patch ? Buffer.from(patch, "base64").toString() : "";
    assert.not.match(decoded, "alpha-only.contoso.com", "a review for beta was answered with alpha's credential spec");
    assert.not.match(reply.text, "alpha-only.contoso.com");
    // Neither member serves: both name one cluster, and which one is meant is not for the app to guess.
    assert.is(reply.status, 503, reply.text);
  } finally {
    await webhook.close();
    await alpha.close();
  }
});

// Careless operator: one member's setting stops the whole fleet.
Findings("F2 one member's unresolved Key Vault reference leaves the other members serving", async () => {
  const alpha = await startFakeApiServer();
  alpha.state.credSpecs = new Map([[specName, credSpecFixture(specName) as unknown as Record<string, unknown>]]);
  alpha.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  const saved = { ...process.env };
  await stopAdmissionRuntime();
  Object.assign(process.env, {
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig }, "new-member": { kubeconfig: alpha.kubeconfig, context: "fake" } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    // Adding a member: its Key Vault secret is not readable yet (access granted a minute later).
    GMSA_CLUSTER_SECRET_NEW_MEMBER: "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/new-member/)",
    GMSA_CREDSPEC_CACHE: "false",
  });
  delete process.env.KUBECONFIG;
  const logs: string[] = [];
  try {
    const body = Buffer.from(JSON.stringify(review("CREATE", podNaming(specName))));
    const reply = await serveAdmission(
      webhooks.mutate,
      { method: "POST", contentType: "application/json", contentLength: String(body.length), timeout: null, readBody: async () => body },
      { info: (l) => logs.push(l), warn: (l) => logs.push(l), error: (l) => logs.push(l) },
      { kind: "path", cluster: "alpha", secret: secrets.alpha },
    );
    assert.is(reply.status, 200, `alpha, whose settings are fine, was answered ${reply.status}: ${logs.join(" | ").slice(0, 300)}`);
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
    await stopAdmissionRuntime();
    await alpha.close();
  }
});

// A secret echoed back: the local host's 404 names the path it could not route.
Findings("F3 a url-wired path with a typo is answered 404 without echoing the secret in it", async () => {
  const alpha = await startFakeApiServer();
  const webhook = await startLocalFleetWebhook({ GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig } }), GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha });
  try {
    const reply = await httpsCall(`${webhook.server.url}/clusters/alpha/${secrets.alpha}/mutatee`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.is(reply.status, 404);
    assert.not.match(reply.text, secrets.alpha, `the 404 body: ${reply.text}`);
  } finally {
    await webhook.close();
    await alpha.close();
  }
});

// Cluster B's admin (or anyone who may create credential specs there) against the shared instance.
Findings("F5 one member's credential spec cache is bounded (what one cluster holds cannot take the memory every member shares)", async () => {
  const beta: FakeApiServer = await startFakeApiServer();
  const fixture = credSpecFixture(specName);
  const padding = "x".repeat(100_000);
  const count = 300;
  beta.state.credSpecs = new Map(
    Array.from({ length: count }, (_, i) => {
      const name = `bulk-${i}`;
      return [
        name,
        {
          ...fixture,
          metadata: { name },
          credspec: { ...fixture.credspec, ActiveDirectoryConfig: { GroupManagedServiceAccounts: [{ Name: padding + i, Scope: "contoso" }] } },
        } as unknown as Record<string, unknown>,
      ];
    }),
  );
  beta.state.credSpecs.set(specName, fixture as unknown as Record<string, unknown>);
  beta.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  const webhook = await startLocalFleetWebhook({ GMSA_CLUSTERS: JSON.stringify({ beta: { kubeconfig: beta.kubeconfig } }), GMSA_CLUSTER_SECRET_BETA: secrets.beta });
  try {
    global.gc?.();
    const before = process.memoryUsage().heapUsed;
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const first = await httpsCall(`${webhook.server.url}/clusters/beta/${secrets.beta}/validate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podNaming(specName))),
    });
    const member = webhook.runtime.members.get("beta")!;
    const deadline = Date.now() + 15_000;
    const settled = () => member.status().credSpecCache?.synced || member.status().credSpecCache?.overflow;
    while (!settled() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    loop.disable();
    global.gc?.();
    const held = process.memoryUsage().heapUsed - before;
    const status = member.status().credSpecCache;
    const size = status?.size ?? 0;
    console.log(
      `    beta's cache holds ${size} specs of ~100 kB (overflow: ${status?.overflow}); heap grew by ${(held / 1e6).toFixed(0)} MB (64 members may each do this); the event loop every member shares stalled up to ${(loop.max / 1e6).toFixed(0)} ms`,
    );
    assert.ok(settled(), "the cache neither synced nor stopped: the test proves nothing");
    assert.ok(size < count, `beta's cache took all ${size} specs (~${(held / 1e6).toFixed(0)} MB); no setting bounds it`);
    // Bounded, and still correct: the pod is judged from direct reads, before and after.
    const after = await httpsCall(`${webhook.server.url}/clusters/beta/${secrets.beta}/validate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podNaming(specName))),
    });
    for (const reply of [first, after]) assert.is(JSON.parse(reply.text).response.allowed, true, reply.text);
  } finally {
    await webhook.close();
    await beta.close();
  }
});

Findings.run();
