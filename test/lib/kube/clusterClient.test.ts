import { KubeConfig } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createAdmissionRuntime } from "../../../lib/app/runtime.js";
import { entraApiAccess } from "../../../lib/kube/entraApiAccess.js";
import { clusterPorts, keptClusterAccess, portsFor, type ClusterPorts } from "../../../lib/kube/clusterClient.js";
import { memberClient, type MemberTimers } from "../../../lib/fleet/memberClient.js";
import type { ArmFetch } from "../../../lib/kube/aksClusterEndpoint.js";
import { aksServerScope } from "../../../lib/kube/entraAccess.js";
import { stringify } from "yaml";
import { apiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import { kubeConfigFor } from "../../support/kubeconfigs.js";
import { serviceAccountPrincipal } from "../../../lib/gmsa/ports.js";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";
import { readAdmissionSettings } from "../../../lib/settings/admission.js";
import { fakeCredential } from "../../support/fakeCredential.js";
import { startFakeApiServer, type FakeApiServer } from "../../support/fakeApiServer.js";
import { credSpecFixture } from "../../support/fixtures.js";

interface Context {
  api: FakeApiServer;
  ports: Array<Pick<ClusterPorts, "stop">>;
}

const noDeadline = new AbortController().signal;
const web = serviceAccountPrincipal("apps", "web");

function settings(api: FakeApiServer, env: Record<string, string> = {}) {
  return readAdmissionSettings({ KUBECONFIG: api.kubeconfig, GMSA_CREDSPEC_CACHE: "false", GMSA_AUTH_CACHE_TTL_SECONDS: "0", ...env });
}

async function open(context: Context, env: Record<string, string> = {}): Promise<ClusterPorts> {
  const ports = await clusterPorts(settings(context.api, env), () => {});
  context.ports.push(ports);
  return ports;
}

function getsOf(api: FakeApiServer, name: string): number {
  return api.calls.filter((c) => c.method === "GET" && c.path === `/apis/windows.k8s.io/v1/gmsacredentialspecs/${name}`).length;
}

async function until(condition: () => boolean, what: string, ms = 3000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > ms) assert.unreachable(`${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// ---------------------------------------------------------------------------------------------

const Connections = suite<Context>("one ClusterPorts keeps its connections to the API server alive");

Connections.before.each(async (context) => {
  context.api = await startFakeApiServer();
  context.ports = [];
});

Connections.after.each(async (context) => {
  for (const ports of context.ports) await ports.stop();
  await context.api.close();
});

// A connection goes back to the pool a moment after its answer is read. An API call hands its
// answer back only then, so the caller's next call finds it free; calls of other admissions made
// at that moment may still open a second one. "A few" is what matters; a handshake per call is the bug.

Connections("40 lookups of unknown names, one after another, cost a TLS handshake or two, not 40", async (context) => {
  const ports = await open(context);
  for (let i = 0; i < 40; i++) assert.equal(await ports.credSpecs.lookup(`unknown-${i}`, { signal: noDeadline }), { kind: "notFound" });
  assert.is(context.api.calls.length, 40);
  assert.ok(context.api.connections.count <= 2, `${context.api.connections.count} handshakes for 40 calls`);
});

Connections("credential spec reads and access reviews share the same connections", async (context) => {
  context.api.state.credSpecs.set("webapp1-credspec", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>);
  const ports = await open(context);
  for (let i = 0; i < 10; i++) {
    assert.is((await ports.credSpecs.lookup("webapp1-credspec", { signal: noDeadline })).kind, "found");
    assert.equal(await ports.authorizer.mayUse(web, "apps", "webapp1-credspec", { signal: noDeadline }), { allowed: false, reason: undefined });
  }
  assert.is(context.api.calls.length, 20);
  assert.ok(context.api.connections.count <= 2, `${context.api.connections.count} handshakes for 20 calls`);
});

Connections("a call made as soon as the one before it is answered goes out on the same connection", async (context) => {
  // The first admission of a cold instance: its review, then its read, then another read.
  context.api.state.credSpecs.set("webapp1-credspec", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>);
  const ports = await open(context);
  assert.equal(await ports.authorizer.mayUse(web, "apps", "webapp1-credspec", { signal: noDeadline }), { allowed: false, reason: undefined });
  assert.is((await ports.credSpecs.lookup("webapp1-credspec", { signal: noDeadline })).kind, "found");
  assert.equal(await ports.credSpecs.lookup("unknown", { signal: noDeadline }), { kind: "notFound" });
  assert.is(context.api.calls.length, 3);
  assert.is(context.api.connections.count, 1);
});

Connections("the informer's list and watch ride the same pool", async (context) => {
  const ports = await open(context, { GMSA_CREDSPEC_CACHE: "true" });
  await ports.credSpecs.lookup("first", { signal: noDeadline });
  await until(() => ports.cacheStatus()?.synced === true, "the cache syncs");
  for (let i = 0; i < 10; i++) await ports.authorizer.mayUse(web, "apps", `spec-${i}`, { signal: noDeadline });
  // The watch holds one connection open; everything else reuses the others.
  assert.ok(context.api.connections.count <= 3, `${context.api.connections.count} handshakes for a list, a watch, a GET and 10 reviews`);
});

Connections("an Entra token that is renewed is sent on the same connection", async (context) => {
  const credential = fakeCredential([
    { token: "first-token", lifetimeMs: 3_600_000 },
    { token: "second-token", lifetimeMs: 3_600_000 },
  ]);
  const config = await entraApiAccess({ credential, server: context.api.url, caPem: context.api.caPem });
  const ports = portsFor(config, settings(context.api), () => {});
  context.ports.push(ports);
  await ports.credSpecs.lookup("a", { signal: noDeadline });
  config.invalidateToken();
  await ports.credSpecs.lookup("b", { signal: noDeadline });
  assert.equal(
    context.api.calls.map((c) => c.authorization),
    ["Bearer first-token", "Bearer second-token"],
  );
  await ports.credSpecs.lookup("c", { signal: noDeadline });
  assert.is(context.api.calls[2]?.authorization, "Bearer second-token");
  assert.ok(context.api.connections.count <= 2, `${context.api.connections.count} handshakes for 3 calls`);
});

Connections.run();

// ---------------------------------------------------------------------------------------------

const Concurrency = suite<Context>("calls in flight towards the API server are capped per instance");

Concurrency.before.each(async (context) => {
  context.api = await startFakeApiServer();
  context.ports = [];
});

Concurrency.after.each(async (context) => {
  for (const ports of context.ports) await ports.stop();
  await context.api.close();
});

Concurrency("a burst of 200 distinct names never has more than the cap in flight", async (context) => {
  context.api.state.delayMs = 20;
  const ports = await open(context, { GMSA_API_CONCURRENCY: "4" });
  const started = Date.now();
  const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => ports.credSpecs.lookup(`burst-${i}`, { signal: noDeadline })));
  console.log(`  200 unknown names, cap 4, 20 ms each: ${Date.now() - started} ms, ${context.api.connections.count} handshakes`);
  assert.ok(answers.every((a) => a.kind === "notFound"));
  assert.is(context.api.load.most, 4);
  assert.ok(context.api.connections.count <= 4, `${context.api.connections.count} handshakes for 200 calls`);
});

Concurrency("a waiter whose admission gives up leaves the queue without calling the API server", async (context) => {
  context.api.state.delayMs = 300;
  const ports = await open(context, { GMSA_API_CONCURRENCY: "1" });
  const first = ports.credSpecs.lookup("slow", { signal: noDeadline });
  first.catch(() => {}); // awaited below; a failing assertion must not leave it unhandled
  const started = Date.now();
  try {
    await ports.credSpecs.lookup("queued", { signal: AbortSignal.timeout(50) });
    assert.unreachable("the queued lookup gave up");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
    assert.is((error as ClusterUnavailableError).failure, "timeout");
    assert.match((error as Error).message, /all 1 calls this instance makes at once were taken/);
  }
  assert.ok(Date.now() - started < 250, "gave up with its own budget, not the slow call's");
  await first;
  // The next call finds the slot free at once.
  context.api.state.delayMs = 0;
  await ports.credSpecs.lookup("next", { signal: AbortSignal.timeout(500) });
  assert.equal(
    context.api.calls.map((c) => c.path.split("/").pop()),
    ["slow", "next"],
  );
});

Concurrency("a legitimate admission is answered quickly while another waits on 60 unknown names", async (context) => {
  context.api.state.delayMs = 20;
  context.api.state.credSpecs.set("webapp1-credspec", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>);
  const ports = await open(context, { GMSA_API_CONCURRENCY: "2" });
  const bigAdmission = AbortSignal.timeout(4000);
  const big = Promise.all(Array.from({ length: 60 }, (_, i) => ports.credSpecs.lookup(`many-${i}`, { signal: bigAdmission })));
  await new Promise((resolve) => setTimeout(resolve, 5));
  const started = Date.now();
  const legitimate = await ports.credSpecs.lookup("webapp1-credspec", { signal: AbortSignal.timeout(300) });
  const elapsed = Date.now() - started;
  assert.is(legitimate.kind, "found");
  assert.ok(elapsed < 150, `answered after ${elapsed} ms`);
  await big;
});

Concurrency.run();

// ---------------------------------------------------------------------------------------------

const NotFound = suite<Context>("unknown credential spec names are remembered briefly");

NotFound.before.each(async (context) => {
  context.api = await startFakeApiServer();
  context.ports = [];
});

NotFound.after.each(async (context) => {
  for (const ports of context.ports) await ports.stop();
  await context.api.close();
});

NotFound("without the cache, the same unknown name costs one GET per second at most", async (context) => {
  const ports = await open(context);
  for (let i = 0; i < 20; i++) assert.equal(await ports.credSpecs.lookup("missing", { signal: noDeadline }), { kind: "notFound" });
  assert.is(getsOf(context.api, "missing"), 1);
  // Nothing tells this instance when the spec appears: it asks again within a second.
  context.api.state.credSpecs.set("missing", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>);
  await new Promise((resolve) => setTimeout(resolve, 1050));
  assert.is((await ports.credSpecs.lookup("missing", { signal: noDeadline })).kind, "found");
  assert.is(getsOf(context.api, "missing"), 2);
});

NotFound("with the cache, an unknown name is not asked again while the watch is up", async (context) => {
  const ports = await open(context, { GMSA_CREDSPEC_CACHE: "true" });
  await ports.credSpecs.lookup("warm-up", { signal: noDeadline });
  await until(() => ports.cacheStatus()?.synced === true, "the cache syncs");
  for (let i = 0; i < 20; i++) assert.equal(await ports.credSpecs.lookup("later", { signal: noDeadline }), { kind: "notFound" });
  assert.is(getsOf(context.api, "later"), 1);
  assert.is(ports.cacheStatus()?.notFound, 2);
});

NotFound("a spec created after it was called unknown is accepted as soon as the watch brings it", async (context) => {
  const ports = await open(context, { GMSA_CREDSPEC_CACHE: "true" });
  await ports.credSpecs.lookup("warm-up", { signal: noDeadline });
  await until(() => ports.cacheStatus()?.synced === true, "the cache syncs");
  assert.equal(await ports.credSpecs.lookup("later", { signal: noDeadline }), { kind: "notFound" });
  context.api.addCredSpec("later", { credspec: credSpecFixture("webapp1-credspec").credspec });
  await until(() => ports.cacheStatus()?.size === 1, "the watch brings the spec");
  const found = await ports.credSpecs.lookup("later", { signal: noDeadline });
  assert.is(found.kind, "found");
  assert.is(ports.cacheStatus()?.notFound, 1, "the name was forgotten when the spec appeared");
  assert.is(getsOf(context.api, "later"), 1);
});

NotFound.run();

// ---------------------------------------------------------------------------------------------

const PlainHttp = suite<Context>("a kubeconfig whose server is plain HTTP");

PlainHttp.before.each((context) => {
  context.ports = [];
});

PlainHttp.after.each(async (context) => {
  for (const ports of context.ports) await ports.stop();
  await context.api.close();
});

PlainHttp("on loopback, as kubectl proxy serves it, reads, reviews and the watch all work", async (context) => {
  context.api = await startFakeApiServer({ plainHttp: true });
  context.api.state.credSpecs.set("webapp1-credspec", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>);
  context.api.state.grants.add(`${web.user}|webapp1-credspec`);
  const runtime = await createAdmissionRuntime(settings(context.api, { GMSA_CREDSPEC_CACHE: "true" }));
  const cluster = await runtime.members.get("default")!.start();
  context.ports.push(cluster);
  assert.is((await cluster.credSpecs.lookup("webapp1-credspec", { signal: noDeadline })).kind, "found");
  assert.equal(await cluster.authorizer.mayUse(web, "apps", "webapp1-credspec", { signal: noDeadline }), { allowed: true });
  await until(() => cluster.cacheStatus()?.synced === true, "the watch over plain HTTP syncs");
  assert.ok(context.api.connections.count <= 3, `${context.api.connections.count} connections`);
});

PlainHttp("to another host, start-up is refused naming KUBECONFIG and the reason", async (context) => {
  context.api = await startFakeApiServer({ plainHttp: true, kubeconfigServer: "http://10.20.30.40:8001" });
  try {
    await createAdmissionRuntime(settings(context.api));
    assert.unreachable("start-up was refused");
  } catch (error) {
    assert.instance(error, Error);
    const message = (error as Error).message;
    assert.match(message, `KUBECONFIG (${context.api.kubeconfig}) cannot be used`);
    assert.match(message, /http:\/\/10\.20\.30\.40:8001 is plain HTTP on another host/);
  }
  assert.is(context.api.calls.length, 0);
});

PlainHttp.run();

// ---------------------------------------------------------------------------------------------

const Rotation = suite("a pool is kept per TLS identity");

Rotation("a new CA (a rotated cluster, or another one) gets its own pool and is trusted at once", async () => {
  const [first, second] = [await startFakeApiServer(), await startFakeApiServer()];
  const config = new KubeConfig();
  const point = (api: FakeApiServer) =>
    config.loadFromClusterAndUser({ name: "cluster", server: api.url, caData: Buffer.from(api.caPem).toString("base64"), skipTLSVerify: false }, { name: "user", token: "t" });
  point(first);
  const connection = apiServerConnection(config);
  try {
    assert.is((await connection.send({ method: "GET", path: "/apis/windows.k8s.io/v1/gmsacredentialspecs/a" })).status, 404);
    // Same names, another CA (and server): a pool made for the first CA would refuse the second server.
    point(second);
    assert.is((await connection.send({ method: "GET", path: "/apis/windows.k8s.io/v1/gmsacredentialspecs/b" })).status, 404);
    assert.is(first.calls.length, 1);
    assert.is(second.calls.length, 1);
  } finally {
    await connection.close();
    await first.close();
    await second.close();
  }
});

Rotation.run();

// ---------------------------------------------------------------------------------------------

const Kept = suite<Context>("a fleet member's access is kept across its idle stops");

Kept.before.each(async (context) => {
  context.api = await startFakeApiServer();
  context.ports = [];
});

Kept.after.each(async (context) => {
  for (const ports of context.ports) await ports.stop();
  await context.api.close();
});

const resourceId = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one";

/** ARM that declares the loopback API server and hands out a kubeconfig for it, counting what it is asked. */
function fakeArm(api: FakeApiServer): { fetch: ArmFetch; sent: string[]; down: boolean } {
  const arm = {
    sent: [] as string[],
    down: false,
    fetch: (async (url, init) => {
      arm.sent.push(`${init.method} ${new URL(url).pathname.split("/").pop()}`);
      if (arm.down) return new Response(JSON.stringify({ error: { code: "ServiceUnavailable", message: "down" } }), { status: 503 });
      if (init.method === "GET") return new Response(JSON.stringify({ properties: { fqdn: "127.0.0.1" } }), { status: 200 });
      const kubeconfig = stringify({ clusters: [{ name: "aks-one", cluster: { server: api.url, "certificate-authority-data": Buffer.from(api.caPem).toString("base64") } }] });
      return new Response(JSON.stringify({ kubeconfigs: [{ name: "clusterUser", value: Buffer.from(kubeconfig).toString("base64") }] }), { status: 200 });
    }) as ArmFetch,
  };
  return arm;
}

Kept("an idle stop frees the watch and caches but keeps the Entra access: the restart asks neither ARM nor the identity again, even with ARM down", async (context) => {
  context.api.state.credSpecs = new Map([["webapp1", credSpecFixture("webapp1-credspec") as unknown as Record<string, unknown>]]);
  const arm = fakeArm(context.api);
  const credential = fakeCredential([{ token: "aks-token", lifetimeMs: 3_600_000 }]);
  const memberSettings = readAdmissionSettings({ GMSA_API_SERVER_URL: "https://unused.hcp.westeurope.azmk8s.io", GMSA_AUTH_CACHE_TTL_SECONDS: "0" });
  const access = keptClusterAccess(
    () => entraApiAccess({ credential, resourceId, armEndpoint: "https://127.0.0.1:1", armFetch: arm.fetch, loopbackApiServerForTests: true, armRetryDelayMs: 1 }),
    memberSettings,
    () => {},
  );
  let now = 0;
  const timers = new Map<number, () => void>();
  let nextTimer = 0;
  const fakeTimers: MemberTimers = { set: (run) => (timers.set(++nextTimer, run), nextTimer), clear: (handle) => void timers.delete(handle as number) };
  const idle = () => {
    now += 120_000;
    for (const [id, run] of [...timers]) {
      timers.delete(id);
      run();
    }
  };
  const member = memberClient({ name: "alpha", start: () => access.start(), idleMs: 60_000, now: () => now, timers: fakeTimers, log: () => {} });
  const lists = () => context.api.calls.filter((c) => c.path === "/apis/windows.k8s.io/v1/gmsacredentialspecs" && !c.search.includes("watch=true")).length;
  const aksTokens = () => credential.calls.filter((c) => String(c.scopes).includes(aksServerScope)).length;
  try {
    assert.is((await member.credSpecs.lookup("webapp1", { signal: noDeadline })).kind, "found");
    await until(() => member.status().credSpecCache?.synced === true, "the first cache synced");
    assert.equal(arm.sent, ["GET aks-one", "POST listClusterUserCredential"]);
    assert.is(aksTokens(), 1);
    assert.is(lists(), 1);

    idle();
    assert.is(member.status().state, "idle");
    await until(() => context.api.calls.length > 0 && watchersClosed(context.api), "the watch closed");
    arm.down = true;

    assert.is((await member.credSpecs.lookup("webapp1", { signal: noDeadline })).kind, "found");
    await until(() => member.status().credSpecCache?.synced === true, "the new cache synced");
    assert.is(member.status().starts, 2);
    assert.equal(arm.sent, ["GET aks-one", "POST listClusterUserCredential"], "the restart asked ARM again");
    assert.is(aksTokens(), 1, "the restart fetched a new token although the kept one is valid");
    assert.is(lists(), 2, "the restart made a new cache (a new list)");
  } finally {
    await member.stop();
  }
});

Kept("a first read that fails is not kept: the next start reads again", async (context) => {
  const arm = fakeArm(context.api);
  arm.down = true;
  const credential = fakeCredential([{ token: "aks-token", lifetimeMs: 3_600_000 }]);
  const access = keptClusterAccess(
    () => entraApiAccess({ credential, resourceId, armEndpoint: "https://127.0.0.1:1", armFetch: arm.fetch, loopbackApiServerForTests: true, armRetryDelayMs: 1 }),
    readAdmissionSettings({ GMSA_API_SERVER_URL: "https://unused.hcp.westeurope.azmk8s.io" }),
    () => {},
  );
  try {
    await access.start();
    assert.unreachable("started with ARM down");
  } catch (error) {
    assert.instance(error, Error);
  }
  const failed = arm.sent.length;
  arm.down = false;
  const ports = await access.start();
  context.ports.push(ports);
  assert.ok(arm.sent.length > failed, "the second start asked ARM");
});

Kept("a read given up on is not joined: the next start reads afresh, and the old read answering late replaces nothing and opens no pool", async (context) => {
  const configFor = (server: string) => kubeConfigFor({ server, token: "t" });
  const late = configFor("https://127.0.0.1:1");
  // Every call over a kubeconfig starts by applying its credentials: none may be prepared over the late read.
  let prepared = 0;
  const apply = late.applyToHTTPSOptions.bind(late);
  late.applyToHTTPSOptions = async (options) => {
    prepared += 1;
    return apply(options);
  };
  let answerLate: (config: KubeConfig) => void = () => {};
  const answers = [new Promise<KubeConfig>((resolve) => (answerLate = resolve)), Promise.resolve(configFor("https://127.0.0.1:2"))];
  let reads = 0;
  const access = keptClusterAccess(
    () => answers[reads++]!,
    readAdmissionSettings({ GMSA_API_SERVER_URL: "https://unused.hcp.westeurope.azmk8s.io" }),
    () => {},
  );
  // The first start hangs and is given up by its member; the next one is made meanwhile.
  const abandoned = access.start();
  let timer: NodeJS.Timeout | undefined;
  const fresh = await Promise.race([
    access.start(),
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the next start joined the hung read")), 2_000))),
  ]).finally(() => clearTimeout(timer));
  context.ports.push(fresh);
  assert.is(reads, 2);
  assert.is(fresh.server, "https://127.0.0.1:2");
  answerLate(late);
  try {
    context.ports.push(await abandoned);
    assert.unreachable("the late read was used");
  } catch (error) {
    assert.instance(error, Error);
    assert.match((error as Error).message, /too late/);
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.is(prepared, 0, "a call was prepared over the late read");
  const again = await access.start();
  context.ports.push(again);
  assert.is(again.server, "https://127.0.0.1:2", "the late read replaced the newer one");
  assert.is(reads, 2, "the kept access was read again");
});

function watchersClosed(api: FakeApiServer): boolean {
  return api.openWatches === 0;
}

Kept.run();
