import { ApiException } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { callApi } from "../../../lib/kube/apiCall.js";
import { EntraTokenError } from "../../../lib/kube/entraTokenCache.js";
import { withRequestCounters } from "../../../lib/observability/requestCounters.js";

/** What one API call adds to the admission's counters: every call, and as an error only a failure. */
const Counting = suite("API call counting");

async function countersOf(failure: () => unknown): Promise<{ apiCalls: number; apiErrors: number }> {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, async () => {
    try {
      await callApi("a test call", signal, { timeoutMs: 1_000 }, async () => {
        throw failure();
      });
    } catch {
      // A failure ends as ClusterUnavailableError; only the counters matter here.
    }
  });
  return { apiCalls: counters.apiCalls, apiErrors: counters.apiErrors };
}

const answered = (code: number) => () => new ApiException(code, `HTTP ${code}`, { kind: "Status", code }, {});

for (const code of [403, 404, 409, 422]) {
  Counting(`a ${code} answer is an API call, not an API error (the policy acts on it)`, async () => {
    assert.equal(await countersOf(answered(code)), { apiCalls: 1, apiErrors: 0 });
  });
}

Counting("a 401 is retried once with fresh credentials; neither answer is an API error", async () => {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, () =>
    callApi("a test call", signal, { timeoutMs: 1_000, onUnauthorized: () => {} }, async () => {
      throw answered(401)();
    }),
  );
  assert.equal({ apiCalls: counters.apiCalls, apiErrors: counters.apiErrors }, { apiCalls: 2, apiErrors: 0 });
});

for (const code of [500, 503, 429]) {
  Counting(`a ${code} is an API error on every attempt`, async () => {
    const counted = await countersOf(answered(code));
    assert.ok(counted.apiCalls >= 1);
    assert.is(counted.apiErrors, counted.apiCalls, JSON.stringify(counted));
  });
}

Counting("a server that cannot be reached is an API error on every attempt", async () => {
  const counted = await countersOf(() => new Error("connect ECONNREFUSED 127.0.0.1:1"));
  assert.ok(counted.apiCalls >= 1);
  assert.is(counted.apiErrors, counted.apiCalls, JSON.stringify(counted));
});

Counting("no Entra token is an API error", async () => {
  assert.equal(await countersOf(() => new EntraTokenError("the token endpoint refused")), { apiCalls: 1, apiErrors: 1 });
});

Counting("a call that outlives its timeout is an API error", async () => {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, async () => {
    try {
      // Gives up only after the call's 20 ms are over, as a client aborted by its signal does.
      await callApi("a test call", signal, { timeoutMs: 20 }, () => new Promise((_, reject) => setTimeout(() => reject(new Error("aborted")), 60)));
    } catch {
      // ends as a timeout
    }
  });
  assert.ok(counters.apiCalls >= 1);
  assert.is(counters.apiErrors, counters.apiCalls);
});

Counting.run();
