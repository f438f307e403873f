import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startFakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook } from "../support/localWebhook.js";
import { podNaming, review } from "../support/reviews.js";

/**
 * Attack review, idle stop: a member is stopped as idle while its credential spec list is still
 * on its way (its API server is slow). Whatever the list and watch do after that, no request
 * may stay open on that API server, and the next admission starts a fresh client.
 */
const Idle = suite("attack: an idle stop racing a slow list");
const secret = "alpha-secret-".padEnd(40, "a");
const specName = "webapp1-credspec";

Idle("the member stopped while its list hangs leaves no request open on its API server", async () => {
  const alpha = await startFakeApiServer();
  alpha.state.credSpecs = new Map([[specName, credSpecFixture(specName) as unknown as Record<string, unknown>]]);
  alpha.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  const webhook = await startLocalFleetWebhook(
    {
      GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig } }),
      GMSA_CLUSTER_SECRET_ALPHA: secret,
      GMSA_ADMISSION_BUDGET_MS: "1000",
      GMSA_API_TIMEOUT_MS: "1000",
    },
    { idleMs: 300 },
  );
  const member = webhook.runtime.members.get("alpha")!;
  const post = () =>
    httpsCall(`${webhook.server.url}/clusters/alpha/${secret}/mutate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podNaming(specName))),
    });
  try {
    alpha.state.delayMs = 4000;
    alpha.state.delayPath = /gmsacredentialspecs/;
    const first = await post();
    assert.is(JSON.parse(first.text).response.allowed, false, "the slow cluster fails closed");
    // Idle now, with the list still on its way.
    const deadline = Date.now() + 3000;
    while (member.status().state !== "idle" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.is(member.status().state, "idle");
    const openAtStop = alpha.load.now;
    // The list arrives, the informer goes on to its watch (also slow), and its start resolves.
    await new Promise((r) => setTimeout(r, 10_000));
    console.log(`    requests open on alpha: ${openAtStop} when stopped, ${alpha.load.now} 10 s later; calls: ${alpha.calls.map((c) => c.path.replace(/.*\//, "")).join(", ")}`);
    assert.is(alpha.load.now, 0, "a request (list or watch) is still open on a stopped member's API server");
    alpha.state.delayMs = undefined;
    const again = await post();
    assert.is(JSON.parse(again.text).response.allowed, true, again.text);
    assert.is(member.status().starts, 2);
  } finally {
    await webhook.close();
    await alpha.close();
  }
});

Idle.run();
