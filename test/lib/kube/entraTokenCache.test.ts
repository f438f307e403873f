import { suite } from "uvu";
import * as assert from "uvu/assert";
import { EntraTokenError, entraTokenCache, type EntraTokenCache } from "../../../lib/kube/entraTokenCache.js";
import { cachingCredential, fakeCredential, manualClock, type FakeCredential, type TokenStep } from "../../support/fakeCredential.js";

const scope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default";
const minute = 60_000;
const hour = 60 * minute;

interface Context {
  clock: ReturnType<typeof manualClock>;
  credential: FakeCredential;
  cache: EntraTokenCache;
  warnings: string[];
}

const Tokens = suite<Context>("Entra token cache");

function setUp(context: Context, script: TokenStep[]): void {
  context.clock = manualClock();
  context.credential = fakeCredential(script, context.clock.now);
  context.warnings = [];
  context.cache = entraTokenCache(context.credential, scope, {
    purpose: "the AKS API server",
    now: context.clock.now,
    log: (_level, message) => context.warnings.push(message),
  });
}

/** Lets a background refresh that was started finish. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

Tokens("the first request asks the credential, with the AKS scope; later ones are served from the cache", async (context) => {
  setUp(context, [{ token: "A", lifetimeMs: hour }]);
  assert.is(await context.cache.token(), "A");
  context.clock.advance(30 * minute);
  assert.is(await context.cache.token(), "A");
  assert.is(context.credential.calls.length, 1);
  assert.is(context.credential.calls[0]!.scopes, scope);
});

Tokens("without a refresh time, a token is renewed five minutes before it expires, in the background", async (context) => {
  setUp(context, [
    { token: "A", lifetimeMs: hour },
    { token: "B", lifetimeMs: hour },
  ]);
  await context.cache.token();
  context.clock.advance(hour - 5 * minute - 1);
  assert.is(await context.cache.token(), "A");
  assert.is(context.credential.calls.length, 1, "not yet due");
  context.clock.advance(1);
  assert.is(await context.cache.token(), "A", "the current token serves while the new one is fetched");
  await settle();
  assert.is(context.credential.calls.length, 2);
  assert.is(await context.cache.token(), "B");
});

Tokens("the credential's refreshAfterTimestamp decides when to renew", async (context) => {
  setUp(context, [
    { token: "A", lifetimeMs: 24 * hour, refreshAfterMs: 12 * hour },
    { token: "B", lifetimeMs: 24 * hour },
  ]);
  await context.cache.token();
  context.clock.advance(12 * hour - 1);
  await context.cache.token();
  assert.is(context.credential.calls.length, 1);
  context.clock.advance(1);
  await context.cache.token();
  await settle();
  assert.is(await context.cache.token(), "B");
  assert.is(context.credential.calls.length, 2);
  assert.is(context.cache.status().refreshAtTimestamp, context.clock.now() + 24 * hour - 5 * minute);
});

Tokens("an expired token is never sent: the request waits for a new one", async (context) => {
  setUp(context, [
    { token: "A", lifetimeMs: hour },
    { token: "B", lifetimeMs: hour },
  ]);
  await context.cache.token();
  context.clock.advance(hour);
  assert.is(await context.cache.token(), "B");
  assert.is(context.credential.calls.length, 2);
});

Tokens("a token is not used in its last 30 seconds", async (context) => {
  setUp(context, [
    { token: "A", lifetimeMs: hour },
    { token: "B", lifetimeMs: hour },
  ]);
  await context.cache.token();
  context.credential.hold();
  context.clock.advance(hour - 30_000);
  const pending = context.cache.token();
  context.credential.release();
  assert.is(await pending, "B");
});

Tokens("a short-lived token is renewed at half its life and not used in its last quarter", async (context) => {
  setUp(context, [
    { token: "A", lifetimeMs: 2000 },
    { token: "B", lifetimeMs: hour },
  ]);
  await context.cache.token();
  const status = context.cache.status();
  assert.is(status.refreshAtTimestamp, context.clock.now() + 1000);
  context.clock.advance(1499);
  assert.is(await context.cache.token(), "A");
  await settle();
  assert.is(await context.cache.token(), "B", "the background renewal started at half-life has landed");
});

Tokens("concurrent requests share one call to the credential", async (context) => {
  setUp(context, [{ token: "A", lifetimeMs: hour }]);
  context.credential.hold();
  const pending = Array.from({ length: 20 }, () => context.cache.token());
  await settle();
  context.credential.release();
  assert.equal(await Promise.all(pending), Array(20).fill("A"));
  assert.is(context.credential.calls.length, 1);
});

Tokens("invalidate() makes the next request fetch a new token", async (context) => {
  setUp(context, [
    { token: "refused", lifetimeMs: hour },
    { token: "B", lifetimeMs: hour },
  ]);
  assert.is(await context.cache.token(), "refused");
  context.cache.invalidate();
  assert.is(context.cache.status().cached, false);
  assert.is(await context.cache.token(), "B");
  assert.is(await context.cache.token(), "B");
  assert.is(context.credential.calls.length, 2);
});

Tokens("a fetch that started before invalidate() is neither shared afterwards nor cached", async (context) => {
  setUp(context, [
    { token: "stale", lifetimeMs: hour },
    { token: "fresh", lifetimeMs: hour },
  ]);
  context.credential.hold();
  const before = context.cache.token();
  await settle();
  context.cache.invalidate();
  context.credential.release();
  assert.is(await before, "stale", "the caller that waited for it still gets an answer");
  assert.is(await context.cache.token(), "fresh");
  assert.is(context.credential.calls.length, 2);
});

Tokens("a credential failure is an EntraTokenError naming the scope and the cause, and is not cached", async (context) => {
  setUp(context, [{ fail: "ManagedIdentityCredential: Authentication failed.\nlong trace" }, { token: "A", lifetimeMs: hour }]);
  try {
    await context.cache.token();
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, EntraTokenError);
    const message = (error as Error).message;
    assert.match(message, "the AKS API server");
    assert.match(message, scope);
    assert.match(message, "ManagedIdentityCredential: Authentication failed.");
    assert.not.match(message, "long trace");
  }
  assert.is(await context.cache.token(), "A");
});

Tokens("a credential that answers null is an EntraTokenError", async (context) => {
  setUp(context, [{ empty: true }]);
  try {
    await context.cache.token();
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, EntraTokenError);
    assert.match((error as Error).message, "no usable Microsoft Entra token");
  }
});

Tokens("a failed background renewal keeps the current token, warns, and waits 10 s before trying again", async (context) => {
  setUp(context, [{ token: "A", lifetimeMs: hour }, { fail: "endpoint down" }, { token: "B", lifetimeMs: hour }]);
  await context.cache.token();
  context.clock.advance(hour - 5 * minute);
  assert.is(await context.cache.token(), "A");
  await settle();
  assert.is(context.credential.calls.length, 2);
  assert.is(context.warnings.length, 1);
  assert.match(context.warnings[0]!, "endpoint down");
  context.clock.advance(9_999);
  assert.is(await context.cache.token(), "A");
  await settle();
  assert.is(context.credential.calls.length, 2, "no retry within 10 s");
  context.clock.advance(1);
  assert.is(await context.cache.token(), "A");
  await settle();
  assert.is(await context.cache.token(), "B");
  assert.is(context.credential.calls.length, 3);
});

/** Fails the test instead of waiting forever on a promise that never settles. */
async function within<T>(ms: number, what: string, pending: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([pending, late]);
  } finally {
    clearTimeout(timer);
  }
}

Tokens("a credential that hangs and ignores its signal: the wait ends at the fetch timeout, and the next need asks again", async (context) => {
  // Real time here: the timeout is the product's own timer.
  const credential = fakeCredential([{ hang: true }, { token: "A", lifetimeMs: hour }]);
  const cache = entraTokenCache(credential, scope, { purpose: "the AKS API server", fetchTimeoutMs: 100, log: () => undefined });
  const started = Date.now();
  const waiters = [cache.token(), cache.token()];
  for (const waiter of waiters) {
    try {
      await within(2000, "a token from a hung credential", waiter);
      assert.unreachable("a hung credential gives no token");
    } catch (error) {
      assert.instance(error, EntraTokenError, String(error));
      assert.match((error as Error).message, "did not answer within 100 ms");
    }
  }
  assert.ok(Date.now() - started < 1000, `gave up after ${Date.now() - started} ms`);
  assert.is(credential.calls.length, 1, "the waiters shared the one hung call");
  assert.is(await within(2000, "the next token", cache.token()), "A", "the next need started a new call, which answered");
  assert.is(credential.calls.length, 2);
});

Tokens("while a hung call is being waited for, later needs share it; once it is dropped they do not", async (context) => {
  const credential = fakeCredential([{ hang: true }, { hang: true }, { token: "A", lifetimeMs: hour }]);
  const cache = entraTokenCache(credential, scope, { purpose: "the AKS API server", fetchTimeoutMs: 80, log: () => undefined });
  for (let round = 1; round <= 2; round++) {
    const failed = await within(
      2000,
      `round ${round}`,
      cache.token().then(
        () => false,
        () => true,
      ),
    );
    assert.ok(failed);
    assert.is(credential.calls.length, round);
  }
  assert.is(await within(2000, "the third call", cache.token()), "A");
});

Tokens("after invalidate(), a credential that caches is asked past its cache: the retry gets a different token", async (context) => {
  context.clock = manualClock();
  const credential = cachingCredential(
    [
      { token: "refused", lifetimeMs: hour },
      { token: "accepted", lifetimeMs: hour },
    ],
    context.clock.now,
  );
  const cache = entraTokenCache(credential, scope, { purpose: "the AKS API server", now: context.clock.now, log: () => undefined });
  assert.is(await cache.token(), "refused");
  assert.is((await credential.getToken(scope))?.token, "refused", "asked the ordinary way, the credential gives its cached token");
  cache.invalidate();
  assert.is(await cache.token(), "accepted");
  assert.equal(
    credential.calls.map((c) => c.fresh),
    [false, true],
  );
  assert.is(cache.status().freshFetches, 1);
  assert.is(await cache.token(), "accepted", "and it is kept");
});

Tokens("a burst of refusals shares one fetch past the cache", async (context) => {
  context.clock = manualClock();
  const credential = cachingCredential(
    [
      { token: "refused", lifetimeMs: hour },
      { token: "accepted", lifetimeMs: hour },
      { token: "extra", lifetimeMs: hour },
    ],
    context.clock.now,
  );
  const cache = entraTokenCache(credential, scope, { purpose: "the AKS API server", now: context.clock.now, log: () => undefined });
  await cache.token();
  credential.hold();
  cache.invalidate();
  const retries = [cache.token()];
  await settle();
  for (let i = 0; i < 5; i++) {
    cache.invalidate();
    retries.push(cache.token());
  }
  credential.release();
  assert.equal(await Promise.all(retries), Array(6).fill("accepted"));
  assert.equal(
    credential.calls.map((c) => c.fresh),
    [false, true],
  );
});

Tokens("a forced fetch that fails is forced again on the next try", async (context) => {
  context.clock = manualClock();
  const credential = cachingCredential([{ token: "refused", lifetimeMs: hour }, { fail: "endpoint busy" }, { token: "accepted", lifetimeMs: hour }], context.clock.now);
  const cache = entraTokenCache(credential, scope, { purpose: "the AKS API server", now: context.clock.now, log: () => undefined });
  await cache.token();
  cache.invalidate();
  try {
    await cache.token();
    assert.unreachable("the forced fetch fails");
  } catch (error) {
    assert.instance(error, EntraTokenError);
  }
  assert.is(await cache.token(), "accepted", "not the refused token from the credential's cache");
  assert.equal(
    credential.calls.map((c) => c.fresh),
    [false, true, true],
  );
});

Tokens.run();
