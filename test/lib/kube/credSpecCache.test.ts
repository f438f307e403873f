import { KubeConfig } from "@kubernetes/client-node";
import { suite } from "uvu";
import { apiServerConnection, type ApiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import * as assert from "uvu/assert";
import { credSpecApi } from "../../../lib/kube/credSpecApi.js";
import type { CacheStateEvent } from "../../../lib/observability/cacheEvents.js";
import { credSpecCache, maxListPageBytes, type CredSpecCache, type CredSpecCacheOptions } from "../../../lib/kube/credSpecCache.js";
import { maxCredSpecObjectBytes } from "../../../lib/gmsa/credSpecSize.js";
import { startFakeApiServer, type FakeApiServer } from "../../support/fakeApiServer.js";
import { credSpecFixture } from "../../support/fixtures.js";

interface Context {
  api: FakeApiServer;
  cache?: CredSpecCache;
  logs: string[];
}

const noDeadline = new AbortController().signal;
const Bounds = suite<Context>("credSpecCache: what one cluster's cache may hold is bounded");

function specs(count: number, padding = 0): Map<string, Record<string, unknown>> {
  const fixture = credSpecFixture("webapp1-credspec");
  return new Map(
    Array.from({ length: count }, (_, i) => {
      const name = `spec-${i}`;
      return [name, { ...fixture, metadata: { name }, credspec: { ...fixture.credspec, padding: "x".repeat(padding) } } as unknown as Record<string, unknown>];
    }),
  );
}

function open(context: Context, options: Partial<CredSpecCacheOptions> = {}): CredSpecCache {
  const config = new KubeConfig();
  config.loadFromFile(context.api.kubeconfig);
  const connection = apiServerConnection(config);
  const direct = credSpecApi(connection, { timeoutMs: 2000 });
  context.cache = credSpecCache(connection, { direct, log: (level, message) => context.logs.push(`${level} ${message}`), ...options });
  return context.cache;
}

function listsOf(api: FakeApiServer): string[] {
  return api.calls.filter((c) => c.method === "GET" && c.path === "/apis/windows.k8s.io/v1/gmsacredentialspecs" && !c.search.includes("watch=true")).map((c) => c.search);
}

async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > ms) assert.unreachable(`${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Each test of a suite with a fake API server of its own, and the cache it opened stopped after it. */
function withFakeApi(tests: typeof Bounds): void {
  tests.before.each(async (context) => {
    context.api = await startFakeApiServer();
    context.cache = undefined;
    context.logs = [];
  });
  tests.after.each(async (context) => {
    await context.cache?.stop();
    await context.api.close();
  });
}

withFakeApi(Bounds);

Bounds("within its bounds it lists in pages and holds every spec", async (context) => {
  context.api.state.credSpecs = specs(25);
  const cache = open(context, { maxSpecs: 25, pageSize: 10 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().synced, "synced");
  assert.equal(cache.status(), { started: true, synced: true, stale: false, size: 25, notFound: 0, overflow: false });
  assert.equal(
    listsOf(context.api).map((q) => new URLSearchParams(q).get("continue")),
    [null, "10", "20"],
  );
});

Bounds("more specs than it may hold: refused a page past the bound, the cache stops and lookups read the API server", async (context) => {
  context.api.state.credSpecs = specs(100);
  const cache = open(context, { maxSpecs: 15, pageSize: 10 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().overflow, "overflow");
  // Two pages of ten were enough to know: the rest of the list was never asked for.
  assert.is(listsOf(context.api).length, 2);
  assert.equal(cache.status(), { started: false, synced: false, stale: false, size: 0, notFound: 0, overflow: true });
  assert.ok(
    context.logs.some((l) => /^warn credential spec cache stopped: the cluster has more than 15 credential specs/.test(l)),
    context.logs.join("\n"),
  );
  // Still correct, one GET per lookup, and a miss is remembered briefly as without a cache.
  const gets = () => context.api.calls.filter((c) => c.path === "/apis/windows.k8s.io/v1/gmsacredentialspecs/spec-42").length;
  assert.is((await cache.lookup("spec-42", { signal: noDeadline })).kind, "found");
  assert.is((await cache.lookup("spec-42", { signal: noDeadline })).kind, "found");
  assert.is(gets(), 2);
  assert.is((await cache.lookup("absent", { signal: noDeadline })).kind, "notFound");
  assert.is((await cache.lookup("absent", { signal: noDeadline })).kind, "notFound");
  assert.is(context.api.calls.filter((c) => c.path.endsWith("/gmsacredentialspecs/absent")).length, 1);
  // It does not come back: no list or watch after the overflow.
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.is(listsOf(context.api).length, 2);
  assert.is(context.api.calls.filter((c) => c.search.includes("watch=true")).length, 0);
});

Bounds("specs larger in all than it may hold stop it the same way", async (context) => {
  context.api.state.credSpecs = specs(8, 10_000);
  const cache = open(context, { maxBytes: 50_000, pageSize: 3 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().overflow, "overflow");
  assert.is(listsOf(context.api).length, 2, "refused on the page that passed 50 000 bytes");
  assert.ok(
    context.logs.some((l) => l.includes("take more than 50000 bytes of memory")),
    context.logs.join("\n"),
  );
  assert.is((await cache.lookup("spec-7", { signal: noDeadline })).kind, "found");
});

Bounds("a list that replaces every spec by another is counted as the new list, not the old and the new together", async (context) => {
  context.api.state.credSpecs = specs(3);
  const cache = open(context, { maxSpecs: 4, minBackoffMs: 10, maxBackoffMs: 10 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().synced, "synced");
  // Every spec renamed while the watch was down: the list after it brings three other names.
  context.api.state.credSpecs = new Map([...specs(3)].map(([name, spec]) => [`renamed-${name}`, { ...spec, metadata: { name: `renamed-${name}` } }]));
  // The list and the watch (one path) fail until the renamed specs are in place.
  context.api.state.failWith = 500;
  context.api.state.failPath = /\/gmsacredentialspecs$/;
  context.api.breakWatches();
  await until(() => cache.status().stale, "stale");
  context.api.state.failWith = undefined;
  await until(() => !cache.status().stale, "listed again");
  assert.equal(cache.status(), { started: true, synced: true, stale: false, size: 3, notFound: 0, overflow: false });
  assert.is((await cache.lookup("renamed-spec-2", { signal: noDeadline })).kind, "found");
});

Bounds("specs are counted by the memory they take once parsed, not their JSON's length: empty objects take 20 times theirs", async (context) => {
  // Each spec: about 15 KB of JSON, 5 000 empty objects, over 300 KB once parsed.
  const padded = new Map([...specs(6)].map(([name, spec]) => [name, { ...spec, credspec: { ...(spec.credspec as object), Padding: Array.from({ length: 5000 }, () => ({})) } }]));
  const json = [...padded.values()].reduce((sum, spec) => sum + JSON.stringify(spec).length, 0);
  assert.ok(json < 100_000, `${json} bytes of JSON in all`);
  context.api.state.credSpecs = padded;
  const cache = open(context, { maxBytes: 1_000_000, pageSize: 2 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().overflow, "overflow");
  assert.ok(
    context.logs.some((l) => l.includes("take more than 1000000 bytes of memory")),
    context.logs.join("\n"),
  );
  assert.is(listsOf(context.api).length, 2, "refused on the page that passed the bound");
});

Bounds("a spec larger than admission reads is answered tooLarge from the cache, through the list, the watch and a direct read alike", async (context) => {
  const all = specs(3);
  const big = { ...all.get("spec-1")!, credspec: { ...(all.get("spec-1")!.credspec as object), Padding: "x".repeat(maxCredSpecObjectBytes) } };
  all.set("spec-1", big);
  context.api.state.credSpecs = all;
  // The list holds it whole until its last page, and counts it so; kept, it is a name.
  const cache = open(context, { maxBytes: 1_000_000 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().synced, "synced");
  assert.equal(cache.status(), { started: true, synced: true, stale: false, size: 3, notFound: 0, overflow: false });
  const gets = () => context.api.calls.filter((c) => c.path.endsWith("/gmsacredentialspecs/spec-1")).length;
  assert.equal(await cache.lookup("spec-1", { signal: noDeadline }), { kind: "tooLarge" });
  assert.is(gets(), 0, "answered from the cache");
  assert.is((await cache.lookup("spec-2", { signal: noDeadline })).kind, "found");
  // So is one short as JSON that takes more than 1 MiB parsed: 20 000 empty objects.
  const emptyObjects = { ...big, metadata: { name: "spec-5" }, credspec: { ...(big.credspec as object), Padding: Array.from({ length: 20_000 }, () => ({})) } };
  context.api.addCredSpec("spec-5", emptyObjects);
  await until(() => cache.status().size === 4, "the watch brought spec-5");
  assert.equal(await cache.lookup("spec-5", { signal: noDeadline }), { kind: "tooLarge" });
  // Through the watch too, and read directly the answer is the same. Counted in bytes as the API
  // server writes them: 90 000 characters of three bytes each are too large, as 90 000 of one are not.
  const threeByte = { ...big, metadata: { name: "spec-3" }, credspec: { ...(big.credspec as object), Padding: "\u20ac".repeat(90_000) } };
  const oneByte = { ...big, metadata: { name: "spec-4" }, credspec: { ...(big.credspec as object), Padding: "e".repeat(90_000) } };
  context.api.addCredSpec("spec-3", threeByte);
  context.api.addCredSpec("spec-4", oneByte);
  await until(() => cache.status().size === 6, "the watch brought spec-3 and spec-4");
  assert.equal(await cache.lookup("spec-3", { signal: noDeadline }), { kind: "tooLarge" });
  assert.is((await cache.lookup("spec-4", { signal: noDeadline })).kind, "found");
  const config = new KubeConfig();
  config.loadFromFile(context.api.kubeconfig);
  const connection = apiServerConnection(config);
  try {
    const direct = credSpecApi(connection, { timeoutMs: 2000 });
    assert.equal(await direct.lookup("spec-1", { signal: noDeadline }), { kind: "tooLarge" });
    assert.equal(await direct.lookup("spec-3", { signal: noDeadline }), { kind: "tooLarge" });
    assert.equal(await direct.lookup("spec-5", { signal: noDeadline }), { kind: "tooLarge" });
    assert.is((await direct.lookup("spec-4", { signal: noDeadline })).kind, "found");
    assert.is((await direct.lookup("spec-2", { signal: noDeadline })).kind, "found");
  } finally {
    await connection.close();
  }
});

Bounds("a list page longer than a page of specs takes stops it unread, and lookups read the API server", async (context) => {
  const all = specs(3, 0);
  // Each under what admission reads, three of them more than a page may take.
  const share = Math.ceil(maxListPageBytes / 3) + 1000;
  assert.ok(share < maxCredSpecObjectBytes * 8);
  for (const [name, spec] of all) all.set(name, { ...spec, metadata: { name, annotations: { note: "x".repeat(share) } } });
  context.api.state.credSpecs = all;
  const cache = open(context);
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().overflow, "overflow");
  assert.ok(
    context.logs.some((l) => l.includes(`larger than ${maxListPageBytes} bytes`)),
    context.logs.join("\n"),
  );
  assert.equal(await cache.lookup("spec-2", { signal: noDeadline }), { kind: "tooLarge" }, "read directly, each is larger than admission reads");
});

Bounds("a spec that arrives through the watch past a bound stops it too", async (context) => {
  context.api.state.credSpecs = specs(3);
  const cache = open(context, { maxSpecs: 3 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => cache.status().synced, "synced");
  assert.is(cache.status().size, 3);
  context.api.addCredSpec("spec-3", specs(4).get("spec-3")!);
  await until(() => cache.status().overflow, "overflow");
  assert.is(cache.status().size, 0);
  assert.is((await cache.lookup("spec-3", { signal: noDeadline })).kind, "found");
});

Bounds.run();

/** The first admission of a cold instance is answered from its own read, before the list begins. */
const Start = suite<Context>("credSpecCache: the list starts after the first lookup's own read");

withFakeApi(Start);

const readsOf = (api: FakeApiServer, name: string) => api.calls.filter((c) => c.method === "GET" && c.path === `/apis/windows.k8s.io/v1/gmsacredentialspecs/${name}`).length;

Start("the first lookup reads its spec with no list on the way; the list follows once it is answered", async (context) => {
  context.api.state.credSpecs = specs(25);
  const cache = open(context, { pageSize: 10 });
  assert.is((await cache.lookup("spec-3", { signal: noDeadline })).kind, "found");
  assert.is(readsOf(context.api, "spec-3"), 1);
  assert.equal(listsOf(context.api), []);
  assert.is(cache.status().started, false);
  await until(() => cache.status().synced, "synced");
  assert.equal(
    listsOf(context.api).map((q) => new URLSearchParams(q).get("continue")),
    [null, "10", "20"],
  );
  // From the cache now: no further read.
  assert.is((await cache.lookup("spec-3", { signal: noDeadline })).kind, "found");
  assert.is(readsOf(context.api, "spec-3"), 1);
});

Start("lookups that arrive together start one list", async (context) => {
  context.api.state.credSpecs = specs(25);
  const cache = open(context, { pageSize: 10 });
  const found = await Promise.all(["spec-1", "spec-2", "spec-3", "spec-404"].map((name) => cache.lookup(name, { signal: noDeadline })));
  assert.equal(
    found.map((f) => f.kind),
    ["found", "found", "found", "notFound"],
  );
  await until(() => cache.status().synced, "synced");
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(
    listsOf(context.api).map((q) => new URLSearchParams(q).get("continue")),
    [null, "10", "20"],
  );
});

Start("a first read that fails still starts the list", async (context) => {
  context.api.state.credSpecs = specs(5);
  // Only the read of spec-1 fails, every time it is tried.
  context.api.state.failWith = 503;
  context.api.state.failPath = /\/gmsacredentialspecs\/spec-1$/;
  const cache = open(context, { pageSize: 10 });
  const read = await cache.lookup("spec-1", { signal: noDeadline }).then(
    () => "answered",
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  assert.match(read, /503/);
  await until(() => cache.status().synced, "synced");
  assert.is(cache.status().size, 5);
});

Start("a cache stopped while its first read is on the way never lists", async (context) => {
  context.api.state.credSpecs = specs(5);
  context.api.state.delayMs = 100;
  context.api.state.delayPath = /\/gmsacredentialspecs\/spec-1$/;
  const cache = open(context, { pageSize: 10 });
  const read = cache.lookup("spec-1", { signal: noDeadline });
  await new Promise((resolve) => setTimeout(resolve, 20));
  await cache.stop();
  assert.is((await read).kind, "found");
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(listsOf(context.api), []);
  assert.is(cache.status().started, false);
});

Start("a first read given up by its admission still starts the list; lookups meanwhile read the API server", async (context) => {
  context.api.state.credSpecs = specs(5);
  context.api.state.delayMs = 300;
  context.api.state.delayPath = /\/gmsacredentialspecs\/spec-1$/;
  const cache = open(context, { pageSize: 10 });
  const deadline = new AbortController();
  const first = cache.lookup("spec-1", { signal: deadline.signal }).then(
    () => "answered",
    () => "given up",
  );
  // Before the first read settles: not started, and another lookup is answered by a read of its own.
  assert.is((await cache.lookup("spec-2", { signal: noDeadline })).kind, "found");
  assert.is(cache.status().started, false);
  deadline.abort(new Error("admission budget spent"));
  assert.is(await first, "given up");
  await until(() => cache.status().synced, "synced");
  assert.is(cache.status().size, 5);
});

Start("a cache stopped before its list began never lists", async (context) => {
  context.api.state.credSpecs = specs(5);
  const cache = open(context, { pageSize: 10 });
  await cache.lookup("spec-1", { signal: noDeadline });
  await cache.stop();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(listsOf(context.api), []);
  assert.is(cache.status().started, false);
});

Start("a list whose watch never opens is not believed over the API server: a spec deleted since is not served", async () => {
  // The webhook's role may list but not watch (an RBAC slip): the list holds the spec, every watch is refused.
  const connection: ApiServerConnection = {
    server: "https://cluster.example",
    send: async () => ({
      status: 200,
      body: { metadata: { resourceVersion: "7" }, items: [{ metadata: { name: "deleted-spec", resourceVersion: "6" }, credspec: {} }] },
      warnings: [],
    }),
    stream: async () => ({ status: 403, body: { message: "forbidden" }, lines: async function* () {} }),
    close: async () => {},
  };
  const logs: string[] = [];
  // The API server's own answer for the name: deleted since the list.
  const cache = credSpecCache(connection, { direct: { lookup: async () => ({ kind: "notFound" }) }, log: (_level, line) => logs.push(line), minBackoffMs: 60_000 });
  try {
    assert.is((await cache.lookup("deleted-spec", { signal: noDeadline })).kind, "notFound");
    await until(() => logs.some((line) => line.includes("watch failed")), "the refused watch");
    assert.is(cache.status().synced, false);
    assert.is((await cache.lookup("deleted-spec", { signal: noDeadline })).kind, "notFound", "the stale list was believed over the API server");
  } finally {
    await cache.stop();
  }
});

Start.run();

const States = suite<Context>("credSpecCache: each change of state is reported, for a structured line");
withFakeApi(States);

States("synced, the watch failing, answers served stale (counted, at most once a period), resynced", async (context) => {
  context.api.state.credSpecs = specs(3);
  const events: CacheStateEvent[] = [];
  let clock = 1_000_000;
  const cache = open(context, { onState: (event) => events.push(event), now: () => clock, minBackoffMs: 50, maxBackoffMs: 50, staleReportMs: 60_000 });
  await cache.lookup("spec-0", { signal: noDeadline });
  await until(() => events.some((e) => e.state === "synced"), "synced");
  assert.equal(events[0], { state: "synced", specs: 3, reason: "3 specs" });
  context.api.state.failWith = 500;
  context.api.breakWatches();
  await until(() => events.some((e) => e.state === "watchFailed"), "the watch failed");
  assert.is(events.find((e) => e.state === "watchFailed")!.specs, 3);
  // The API server answers 500: the specs known before are served, and said so once, then counted.
  for (let i = 0; i < 5; i++) assert.is((await cache.lookup("spec-1", { signal: noDeadline })).kind, "found");
  assert.equal(
    events.filter((e) => e.state === "staleServed").map((e) => e.specs),
    [1],
  );
  clock += 60_000;
  await cache.lookup("spec-1", { signal: noDeadline });
  assert.equal(
    events.filter((e) => e.state === "staleServed").map((e) => e.specs),
    [1, 5],
    "the four held back and this one",
  );
  context.api.state.failWith = undefined;
  await until(() => events.some((e) => e.state === "resynced"), "resynced");
  assert.equal(context.logs, [], "with onState, nothing is said in words");
});

States.run();
