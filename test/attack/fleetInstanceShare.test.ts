import { performance } from "node:perf_hooks";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { memberShare } from "../../lib/kube/apiSlots.js";
import { hungAndHealthyMembers } from "../support/hungMember.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * Fleet isolation under the platform's own limit: a Flex Consumption instance serves at most
 * `perInstanceConcurrency` HTTP invocations at once, shared by every member. A member whose API
 * server hangs keeps each admission that waits on it for the whole budget; it may keep no more
 * than its share of the instance (GMSA_INSTANCE_CONCURRENCY), so the other members' admissions
 * still find room, and the excess is refused at once with 503.
 */
const Share = suite("attack: a hung member and the instance's concurrency");
const secrets = { alpha: "alpha-secret-".padEnd(40, "a"), beta: "beta-secret-0123456789".padEnd(40, "b") };
const specName = "webapp1-credspec";

function podIn(namespace: string) {
  const p = pod({ namespace });
  p.spec.containers[0]!.securityContext = gmsa(specName);
  return p;
}

Share("a hung member holds at most its share of an instance's invocations, from however many namespaces; another member is answered meanwhile", async () => {
  const { alpha, beta } = await hungAndHealthyMembers(specName);
  const budgetMs = 2000;
  const instanceConcurrency = 8;
  const share = memberShare(instanceConcurrency);
  assert.is(share, 6, "three quarters of 8");
  const webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: alpha.kubeconfig }, beta: { kubeconfig: beta.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    GMSA_ADMISSION_BUDGET_MS: String(budgetMs),
    GMSA_API_TIMEOUT_MS: String(budgetMs),
    // Far more than the share allows, so that the share alone is what bounds alpha.
    GMSA_API_CONCURRENCY: "64",
    GMSA_API_MAX_WAITING: "64",
    GMSA_INSTANCE_CONCURRENCY: String(instanceConcurrency),
  });
  try {
    const namespaces = ["team-1", "team-2", "team-3", "team-4"];
    const perNamespace = 6;
    const started = performance.now();
    const replies = Promise.all(
      namespaces.flatMap((namespace) =>
        Array.from({ length: perNamespace }, () =>
          httpsCall(`${webhook.server.url}/clusters/alpha/${secrets.alpha}/validate`, {
            ca: webhook.caPem,
            headers: { "content-type": "application/json" },
            body: JSON.stringify(review("CREATE", podIn(namespace))),
          }).then((reply) => ({ ms: performance.now() - started, response: JSON.parse(reply.text).response as { allowed: boolean; status?: { code: number; message: string } } })),
        ),
      ),
    );
    // Alpha holds its whole share now: beta's admission is answered at once all the same.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const betaStarted = performance.now();
    const healthy = await httpsCall(`${webhook.server.url}/clusters/beta/${secrets.beta}/validate`, {
      ca: webhook.caPem,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(review("CREATE", podIn("apps"))),
    });
    const betaMs = performance.now() - betaStarted;
    const answers = await replies;
    // Shed: refused on arrival because too many already wait (that reason is given to no other
    // refusal); held: the rest, each answered once its budget ran out. Told apart by their answer,
    // not by a clock a busy machine can stretch; a shed one still never waits for the budget.
    const isShed = (a: (typeof answers)[number]) => a.response.status?.code === 503 && /too many admissions are already waiting/.test(a.response.status.message);
    const shed = answers.filter(isShed);
    const held = answers.filter((a) => !isShed(a));
    console.log(
      `    ${answers.length} admissions for hung alpha from ${namespaces.length} namespaces, share ${share} of ${instanceConcurrency}: ${held.length} held, ${shed.length} shed at once; beta answered in ${betaMs.toFixed(0)} ms`,
    );
    assert.is(held.length, share, "alpha held exactly its share of the instance");
    for (const { ms } of shed) assert.ok(ms < budgetMs, `a shed admission was answered after ${ms.toFixed(0)} ms, as late as a held one`);
    for (const { ms } of held) assert.ok(ms >= budgetMs * 0.9, `a held admission was answered after ${ms.toFixed(0)} ms, before its budget ran out`);
    for (const { response } of answers) assert.is(response.allowed, false, "nothing is admitted unchecked");
    for (const { response } of shed) {
      assert.is(response.status?.code, 503);
      assert.match(response.status?.message ?? "", /too many admissions are already waiting for the Kubernetes API server/);
    }
    assert.is(JSON.parse(healthy.text).response.allowed, true, "beta's admission was answered while alpha held its share");
    assert.ok(betaMs < budgetMs / 2, `beta waited ${betaMs.toFixed(0)} ms`);
    const logged = webhook.logs.filter((line) => line.includes(`at most ${share} of an instance's concurrent requests wait on one cluster`));
    assert.ok(logged.length > 0, "the log says why the excess was refused");
  } finally {
    await webhook.close();
    await alpha.close();
    await beta.close();
  }
});

Share("the share is three quarters of the instance, at least one, and never all of it when there is more than one", () => {
  assert.equal([1, 2, 4, 8, 16, 32, 1000].map(memberShare), [1, 1, 3, 6, 12, 24, 750]);
});

Share.run();
