import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixtures } from "../support/fixtures.js";
import { postReview } from "../support/httpsClient.js";
import { startLocalWebhook, type LocalWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

interface Context {
  api: FakeApiServer;
  webhook: LocalWebhook;
}

/**
 * With the decision cache on, admissions that ask the same question share one access review. A
 * server that asks to be left alone for a minute must not hold every such admission for that
 * minute: the shared review gives up within the budget and the next admission asks afresh.
 */
const Shared = suite<Context>("a shared access review and a server that answers 429 Retry-After: 60");

Shared.before(async (context) => {
  context.api = await startFakeApiServer();
  context.webhook = await startLocalWebhook({
    KUBECONFIG: context.api.kubeconfig,
    GMSA_API_TIMEOUT_MS: "1000",
    GMSA_ADMISSION_BUDGET_MS: "1500",
    GMSA_CREDSPEC_CACHE: "false",
    GMSA_AUTH_CACHE_TTL_SECONDS: "5",
  });
});

Shared.before.each((context) => {
  const { state, calls } = context.api;
  state.credSpecs = new Map(credSpecFixtures().map((c) => [c.metadata.name, c as unknown as Record<string, unknown>]));
  state.grants = new Set(["system:serviceaccount:apps:default|webapp1-credspec", "system:serviceaccount:apps:builder|webapp1-credspec"]);
  state.failWith = undefined;
  state.failTimes = undefined;
  state.failPath = undefined;
  state.retryAfter = undefined;
  state.delayMs = undefined;
  calls.length = 0;
});

Shared.after(async (context) => {
  await context.webhook.close();
  await context.api.close();
});

/** The pod creator is told plain words and an ID; the reason is in the log line under that ID. */
function loggedDetail(context: Context, message: string): string {
  const id = /correlation ID ([0-9a-f-]{36})/.exec(message)?.[1];
  assert.ok(id, message);
  const line = context.webhook.logs.find((l) => l.includes('"event":"gmsa.admission"') && l.includes(id));
  assert.ok(line, `no log line for ${id}`);
  return String(JSON.parse(line.slice(line.indexOf("{"))).detail);
}

async function validate(context: Context, serviceAccountName = "default") {
  const p = pod({ serviceAccountName });
  p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  const started = Date.now();
  const reply = await postReview(`${context.webhook.server.url}/validate`, context.webhook.caPem, review("CREATE", p));
  assert.is(reply.status, 200, reply.text);
  return { response: JSON.parse(reply.text).response, ms: Date.now() - started };
}

Shared("the admissions sharing the throttled review fail at once with the reason, and the next one is allowed", async (context) => {
  const { state } = context.api;
  state.failWith = 429;
  state.failTimes = 1;
  state.retryAfter = 60;
  state.failPath = /\/localsubjectaccessreviews$/;
  const throttled = await Promise.all([validate(context), validate(context)]);
  for (const { response, ms } of throttled) {
    assert.is(response.allowed, false);
    assert.is(response.status.code, 503, JSON.stringify(response.status));
    assert.match(loggedDetail(context, response.status.message), /answered 429 .* asked to wait 60 s, longer than the admission has left/);
    assert.ok(ms < 800, `answered after ${ms} ms, at once rather than at the end of the budget`);
  }
  const reviews = () => context.api.calls.filter((c) => c.path.endsWith("/localsubjectaccessreviews")).length;
  assert.is(reviews(), 1, "the two admissions shared one review");

  // The API server is healthy again: the throttled answer is not kept, nor is the review that got it.
  const next = await validate(context);
  assert.is(next.response.allowed, true, JSON.stringify(next.response.status));
  assert.is(reviews(), 2);
});

Shared("a Retry-After within the budget but beyond the time left is not slept on", async (context) => {
  const { state } = context.api;
  // Any answer takes 700 ms; the review's 429 asks for 1 s more (within the 1.5 s budget), and
  // only about 800 ms are left.
  state.delayMs = 700;
  state.failWith = 429;
  state.failTimes = 1;
  state.retryAfter = 1;
  state.failPath = /\/localsubjectaccessreviews$/;
  // Another service account: the first test's answer is still in the decision cache.
  const { response, ms } = await validate(context, "builder");
  assert.is(response.status?.code, 503, JSON.stringify(response.status));
  assert.match(loggedDetail(context, response.status.message), /asked to wait 1 s, longer than the admission has left \(\d+ ms\)/);
  assert.ok(ms < 1200, `answered after ${ms} ms, not at the end of the budget`);
});

Shared.run();
