import { suite } from "uvu";
import * as assert from "uvu/assert";
import { callApi, type ApiSend } from "../../../lib/kube/apiCall.js";
import type { ApiReply } from "../../../lib/kube/apiServerConnection.js";
import { EntraTokenError } from "../../../lib/kube/entraTokenCache.js";
import { withRequestCounters } from "../../../lib/observability/requestCounters.js";

/** What one API call adds to the admission's counters: every call, and as an error only a failure. */
const Counting = suite("API call counting");

async function countersOf(call: ApiSend): Promise<{ apiCalls: number; apiErrors: number }> {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, async () => {
    try {
      await callApi("a test call", { signal }, { timeoutMs: 1_000 }, call);
    } catch {
      // A failure ends as ClusterUnavailableError; only the counters matter here.
    }
  });
  return { apiCalls: counters.apiCalls, apiErrors: counters.apiErrors };
}

/** The server answered with this status. */
const answered =
  (code: number): ApiSend =>
  async (): Promise<ApiReply> => ({ status: code, body: { kind: "Status", code }, warnings: [] });

/** No answer: the call failed with this error. */
const failing =
  (error: () => Error): ApiSend =>
  async () => {
    throw error();
  };

for (const code of [403, 404, 409, 422]) {
  Counting(`a ${code} answer is an API call, not an API error (the policy acts on it)`, async () => {
    assert.equal(await countersOf(answered(code)), { apiCalls: 1, apiErrors: 0 });
  });
}

Counting("a 401 is retried once with fresh credentials; neither answer is an API error", async () => {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, () => callApi("a test call", { signal }, { timeoutMs: 1_000, onUnauthorized: () => {} }, answered(401)));
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
  const counted = await countersOf(failing(() => new Error("connect ECONNREFUSED 127.0.0.1:1")));
  assert.ok(counted.apiCalls >= 1);
  assert.is(counted.apiErrors, counted.apiCalls, JSON.stringify(counted));
});

Counting("no Entra token is an API error", async () => {
  assert.equal(await countersOf(failing(() => new EntraTokenError("the token endpoint refused"))), { apiCalls: 1, apiErrors: 1 });
});

Counting("a call that outlives its timeout is an API error", async () => {
  const signal = AbortSignal.timeout(5_000);
  const { counters } = await withRequestCounters(signal, async () => {
    try {
      // Gives up only after the call's 20 ms are over, as a client aborted by its signal does.
      await callApi("a test call", { signal }, { timeoutMs: 20 }, () => new Promise((_, reject) => setTimeout(() => reject(new Error("aborted")), 60)));
    } catch {
      // ends as a timeout
    }
  });
  assert.ok(counters.apiCalls >= 1);
  assert.is(counters.apiErrors, counters.apiCalls);
});

Counting.run();
