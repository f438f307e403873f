import { suite } from "uvu";
import { apiServerConnection } from "../../lib/kube/apiServerConnection.js";
import * as assert from "uvu/assert";
import { KubeConfig } from "@kubernetes/client-node";
import { useDecisionCache } from "../../lib/caching/useDecisionCache.js";
import type { PolicyDependencies } from "../../lib/gmsa/podAdmission.js";
import { serviceAccountPrincipal } from "../../lib/gmsa/ports.js";
import { firstRefusal, type UsePrincipal } from "../../lib/gmsa/usePrincipals.js";
import { apiSlots } from "../../lib/kube/apiSlots.js";
import { useAuthorization } from "../../lib/kube/useAuthorization.js";
import { startFakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * Second attack review, the per-namespace bound on admissions waiting on an API server.
 * FAIL while the finding is present.
 *
 * NSB-1: a credential spec GET (callApi) holds the server under no namespace; only the `use`
 * review (useDecisionCache) names one. An admission whose review is a decision-cache hit and
 * whose spec is read from the API server (before the first list, while the watch is down and
 * the cache stale, or past its bound) is bounded only by the global bound. So one namespace's
 * pods, naming a spec they may use, fill it, and another team's admission is refused 503.
 *
 * NSB-2: four namespaces at their share fill the global bound; whoever can create pods in four
 * namespaces (or create namespaces) gets every other namespace's admissions refused.
 */
const Bypass = suite("attack: per-namespace bound on admissions waiting on the API server");
const specName = "webapp1-credspec";

function podIn(namespace: string, credSpec: string) {
  const p = pod({ namespace });
  p.spec.containers[0]!.securityContext = gmsa(credSpec);
  return p;
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Bypass("NSB-1: one namespace whose use decisions are cached, while credential spec reads are slow, does not get another namespace's admission refused", async () => {
  const api = await startFakeApiServer();
  const teamBSpec = "team-b-credspec";
  api.state.credSpecs = new Map([
    [specName, credSpecFixture(specName) as unknown as Record<string, unknown>],
    [teamBSpec, { ...credSpecFixture(specName), metadata: { name: teamBSpec } } as unknown as Record<string, unknown>],
  ]);
  // team-a may use its spec: nothing here is an abuse of rights it does not have.
  api.state.grants = new Set([`system:serviceaccount:team-a:default|${specName}`, `system:serviceaccount:team-b:default|${teamBSpec}`]);
  // The API server is slow to read team-a's spec and the list (the cache never syncs, as after a
  // cold start or while the watch is down), not team-b's spec or access reviews.
  api.state.delayPath = new RegExp(`gmsacredentialspecs(\\?|/${specName})`);
  api.state.delayMs = 60_000;
  const webhook = await startLocalWebhook({
    KUBECONFIG: api.kubeconfig,
    GMSA_ADMISSION_BUDGET_MS: "8000",
    GMSA_API_TIMEOUT_MS: "8000",
    GMSA_AUTH_CACHE_TTL_SECONDS: "30",
    GMSA_API_CONCURRENCY: "2",
    GMSA_API_MAX_WAITING: "2",
  });
  const send = (body: unknown) =>
    httpsCall(`${webhook.server.url}/mutate`, { ca: webhook.caPem, headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then(
      (reply) => JSON.parse(reply.text).response as { allowed: boolean; status?: { code: number; message: string } },
    );
  try {
    // team-a's first admission: its access review is answered (and kept), its spec read hangs.
    const first = send(review("CREATE", podIn("team-a", specName)));
    await wait(500);
    // Bound per namespace: 2 + 2 = 4; all together: 16. team-a sends 40 more.
    const flood = Promise.all(Array.from({ length: 40 }, () => send(review("CREATE", podIn("team-a", specName)))));
    // Every one of them has reached the webhook (TLS handshakes take a while on a busy machine).
    await wait(3000);
    const victim = await send(review("CREATE", podIn("team-b", teamBSpec)));
    const all = [await first, ...(await flood)];
    const shed = all.filter((r) => r.status?.code === 503).length;
    console.log(`    team-a: ${shed} of 41 shed at once; team-b: allowed=${victim.allowed} ${victim.status?.code ?? ""} ${victim.status?.message ?? ""}`);
    assert.ok(shed >= 41 - 4, `only ${shed} of team-a's 41 admissions were shed: its excess was not bounded at its namespace's share (4)`);
    assert.is(victim.allowed, true, `team-b's admission was refused while team-a's waited: ${victim.status?.message}`);
  } finally {
    api.state.delayMs = 0;
    await webhook.close();
    await api.close();
  }
});

Bypass("NSB-2: namespaces each within their share cannot refuse a namespace that holds nothing", () => {
  const slots = apiSlots(2, 2);
  const held: Array<() => void> = [];
  // Four namespaces an attacker can create pods in, each at its share (2 + 2).
  for (const namespace of ["a1", "a2", "a3", "a4"]) for (let i = 0; i < 4; i++) held.push(slots.hold({ signal: new AbortController().signal, namespace }));
  let refused: string | undefined;
  try {
    held.push(slots.hold({ signal: new AbortController().signal, namespace: "victim" }));
  } catch (error) {
    refused = error instanceof Error ? error.message : String(error);
  }
  for (const leave of held) leave();
  assert.is(refused, undefined, `a namespace holding nothing was refused: ${refused}`);
});

Bypass("NSB-3: one namespace within its share, its pods naming many specs while reviews are slow, does not get another team's review refused", async () => {
  const api = await startFakeApiServer();
  // Every access review takes a while: the API server is slow, not down.
  api.state.delayPath = /subjectaccessreviews/;
  api.state.delayMs = 300;
  const config = new KubeConfig();
  config.loadFromFile(api.kubeconfig);
  // One call at once and one more admission waiting per namespace: 2 per namespace, 8 in all.
  const slots = apiSlots(1, 1);
  const authorizer = useDecisionCache(useAuthorization(apiServerConnection(config), { timeoutMs: 5000, slots }), {
    ttlMs: 5000,
    hold: (call) => slots.hold(call),
  });
  const admission = (namespace: string) => ({ signal: new AbortController().signal, namespace });
  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => "answered",
      (error: unknown) => `refused: ${error instanceof Error ? error.message : String(error)}`,
    );
  try {
    // Two admissions of team-a, its share, each naming four specs: eight reviews under way.
    const teamA = [admission("team-a"), admission("team-a")].flatMap((call, a) =>
      ["one", "two", "three", "four"].map((name) => outcome(authorizer.mayUse(serviceAccountPrincipal("team-a", "default"), "team-a", `${name}-${a}`, call))),
    );
    // A third admission of team-a is past its share and refused at once.
    const third = await outcome(authorizer.mayUse(serviceAccountPrincipal("team-a", "default"), "team-a", "five", admission("team-a")));
    const victim = await outcome(authorizer.mayUse(serviceAccountPrincipal("team-b", "default"), "team-b", "team-b-credspec", admission("team-b")));
    const answered = (await Promise.all(teamA)).filter((o) => o === "answered").length;
    console.log(`    team-a: ${answered} of 8 reviews answered, its third admission ${third}; team-b: ${victim}`);
    assert.match(third, /refused: .*backed up/);
    assert.is(victim, "answered", "team-b's review was refused while team-a stayed within its share");
    assert.is(answered, 8);
  } finally {
    await api.close();
  }
});

Bypass("NSB-4: one namespace within its share, its pods naming many specs while reviews are slow, does not make another team's admission miss its budget", async () => {
  const api = await startFakeApiServer();
  api.state.delayPath = /subjectaccessreviews/;
  api.state.delayMs = 300;
  api.state.grants.add("system:serviceaccount:team-a:default|ok");
  api.state.grants.add("system:serviceaccount:team-b:default|team-b-credspec");
  const config = new KubeConfig();
  config.loadFromFile(api.kubeconfig);
  const slots = apiSlots(1, 1);
  const budgetMs = 1500;
  const authorizer = useDecisionCache(useAuthorization(apiServerConnection(config), { timeoutMs: budgetMs, slots }), {
    ttlMs: 5000,
    hold: (call) => slots.hold(call),
  });
  // An admission as the policy sees it: its namespace carried by its calls, its budget on a timer.
  const admission = (namespace: string): PolicyDependencies => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error(`the admission's budget of ${budgetMs} ms is spent`)), budgetMs).unref();
    return { authorizer, call: { signal: controller.signal, namespace } } as unknown as PolicyDependencies;
  };
  const serviceAccount = (namespace: string): UsePrincipal[] => [
    {
      principal: serviceAccountPrincipal(namespace, "default"),
      description: `service account ${namespace}/default`,
      grantee: { kind: "ServiceAccount", namespace, name: "default" },
    },
  ];
  const outcome = (p: Promise<{ refused?: unknown }>) =>
    p.then(
      (answer) => (answer.refused ? "denied" : "allowed"),
      (error: unknown) => `failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  try {
    // team-a may use "ok", answered once and then kept; each of its two pods names four more,
    // which the policy asks about at once: eight slow reviews under way, each shared by nobody.
    await firstRefusal(["ok"], serviceAccount("team-a"), "team-a", admission("team-a"));
    const teamA = [0, 1].map((a) => outcome(firstRefusal(["ok", `one-${a}`, `two-${a}`, `three-${a}`, `four-${a}`], serviceAccount("team-a"), "team-a", admission("team-a"))));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const started = Date.now();
    const victim = await outcome(firstRefusal(["team-b-credspec"], serviceAccount("team-b"), "team-b", admission("team-b")));
    const took = Date.now() - started;
    console.log(`    team-a: ${(await Promise.all(teamA)).map((o) => o.slice(0, 60)).join(" | ")}; team-b: ${victim.slice(0, 80)} after ${took} ms`);
    assert.is(victim, "allowed", "team-b's one review missed its budget while team-a stayed within its share");
  } finally {
    await api.close();
  }
});

Bypass.run();
