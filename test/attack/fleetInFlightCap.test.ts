import { performance } from "node:perf_hooks";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startFakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * Attack review, isolation: a member's API slots bound its API calls, but not its admissions.
 * Every admission for a member whose API server hangs is held (with its body) until its budget
 * is spent, so one member can hold any number of the instance's concurrent invocations, which
 * on Azure Functions are capped per instance and shared by every member. FAILS while a hung
 * member sheds none of them early.
 */
const Cap = suite("attack: admissions in flight for one hung member");
const secrets = { alpha: "alpha-secret-".padEnd(40, "a"), beta: "beta-secret-".padEnd(40, "b") };
const specName = "webapp1-credspec";

function gmsaPod() {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa(specName);
  return p;
}

Cap("a hung member's excess admissions are shed at once instead of each holding an invocation for the whole budget", async () => {
  const alpha = await startFakeApiServer();
  const beta = await startFakeApiServer();
  for (const api of [alpha, beta]) {
    api.state.credSpecs = new Map([[specName, credSpecFixture(specName) as unknown as Record<string, unknown>]]);
    api.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  }
  alpha.state.delayMs = 60_000;
  const budgetMs = 2000;
  const webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig }, beta: { kubeconfig: beta.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    GMSA_ADMISSION_BUDGET_MS: String(budgetMs),
    GMSA_API_TIMEOUT_MS: String(budgetMs),
    GMSA_API_CONCURRENCY: "4",
  });
  try {
    // About 1 MiB each, as a pod with a large spec would be.
    const big = review("CREATE", { ...gmsaPod(), metadata: { ...gmsaPod().metadata, annotations: { padding: "x".repeat(1 << 20) } } });
    const body = JSON.stringify(big);
    const n = 64;
    const started = performance.now();
    const times = await Promise.all(
      Array.from({ length: n }, () =>
        httpsCall(`${webhook.server.url}/clusters/alpha/${secrets.alpha}/mutate`, { ca: webhook.caPem, headers: { "content-type": "application/json" }, body }).then(() => performance.now() - started),
      ),
    );
    const fast = times.filter((t) => t < budgetMs / 2).length;
    console.log(`    ${n} admissions for hung alpha (4 API slots): ${fast} answered within ${budgetMs / 2} ms, the slowest after ${Math.max(...times).toFixed(0)} ms`);
    assert.ok(fast > 0, `all ${n} admissions for alpha were held for about the budget; nothing bounds a member's admissions in flight`);
  } finally {
    await webhook.close();
    await alpha.close();
    await beta.close();
  }
});

Cap.run();
