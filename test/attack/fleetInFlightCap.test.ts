import { performance } from "node:perf_hooks";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { hungAndHealthyMembers } from "../support/hungMember.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook } from "../support/localWebhook.js";
import { podNaming, review } from "../support/reviews.js";

/**
 * Attack review, isolation: a member's API slots bound its API calls, but not its admissions.
 * Every admission for a member whose API server hangs is held (with its body) until its budget
 * is spent, so one member can hold any number of the instance's concurrent invocations, which
 * on Azure Functions are capped per instance and shared by every member. FAILS while a hung
 * member sheds none of them early (GMSA_API_MAX_WAITING bounds those that wait for a slot).
 */
const Cap = suite("attack: admissions in flight for one hung member");
const secrets = { alpha: "alpha-secret-".padEnd(40, "a"), beta: "beta-secret-0123456789".padEnd(40, "b") };
const specName = "webapp1-credspec";

Cap("a hung member's excess admissions are shed at once instead of each holding an invocation for the whole budget, and a healthy member's are untouched", async () => {
  const { alpha, beta } = await hungAndHealthyMembers(specName);
  const budgetMs = 2000;
  const slots = 16;
  const waiting = 16;
  const webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig }, beta: { kubeconfig: beta.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    GMSA_ADMISSION_BUDGET_MS: String(budgetMs),
    GMSA_API_TIMEOUT_MS: String(budgetMs),
    GMSA_API_CONCURRENCY: String(slots),
    GMSA_API_MAX_WAITING: String(waiting),
  });
  try {
    // 64 KiB each, a large pod: each held admission holds its body too (kept small enough that
    // sending them all does not itself take the second the test allows on a busy machine).
    const big = review("CREATE", { ...podNaming(specName), metadata: { ...podNaming(specName).metadata, annotations: { padding: "x".repeat(1 << 16) } } });
    const body = JSON.stringify(big);
    const n = 64;
    const started = performance.now();
    const replies = Promise.all(
      Array.from({ length: n }, () =>
        httpsCall(`${webhook.server.url}/clusters/alpha/${secrets.alpha}/mutate`, { ca: webhook.caPem, headers: { "content-type": "application/json" }, body }).then((reply) => ({
          ms: performance.now() - started,
          response: JSON.parse(reply.text).response as { allowed: boolean; status?: { code: number; message: string } },
        })),
      ),
    );
    // While alpha's admissions are held and shed, beta's are answered as ever.
    const healthy = await httpsCall(`${webhook.server.url}/clusters/beta/${secrets.beta}/mutate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podNaming(specName))),
    });
    const healthyMs = performance.now() - started;
    const answers = await replies;
    // Shed: refused because too many already wait, which is said only to an admission refused on
    // arrival. Each must come before the budget could have run out for anyone (an admission held
    // is answered a whole budget after it arrived, so no sooner than this): however slowly a busy
    // machine sends the 64 requests, a shed one never waits for the budget.
    const fast = answers.filter((a) => a.response.status?.code === 503 && /too many admissions are already waiting/.test(a.response.status.message));
    const slowestShed = Math.max(0, ...fast.map((a) => a.ms));
    console.log(
      `    ${n} admissions for hung alpha (${slots} API slots, ${waiting} may wait): ${fast.length} shed, the last of them after ${slowestShed.toFixed(0)} ms, the slowest answer after ${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms; beta answered after ${healthyMs.toFixed(0)} ms`,
    );
    assert.ok(fast.length >= n - slots - waiting, `only ${fast.length} of ${n} admissions for alpha were shed; the rest were held for about the budget`);
    assert.ok(slowestShed < budgetMs, `a shed admission was answered after ${slowestShed.toFixed(0)} ms, as late as a held one`);
    for (const { response } of answers) {
      // Shed or timed out, every one is refused: nothing is admitted unchecked.
      assert.is(response.allowed, false);
    }
    for (const { response } of fast) {
      assert.is(response.status?.code, 503);
      assert.match(
        response.status?.message ?? "",
        /too many admissions are already waiting for the Kubernetes API server; the pod was not admitted \(correlation ID [0-9a-f-]{36}\)/,
      );
      const id = /correlation ID ([0-9a-f-]{36})/.exec(response.status?.message ?? "")![1]!;
      const line = webhook.logs.find((l) => l.includes(id));
      assert.ok(line?.includes("the cluster's API calls are backed up"), `the log line for ${id} gives the reason: ${line}`);
    }
    assert.is(JSON.parse(healthy.text).response.allowed, true, "beta's admission was refused while alpha hung");
  } finally {
    await webhook.close();
    await alpha.close();
    await beta.close();
  }
});

Cap.run();
