import { suite } from "uvu";
import * as assert from "uvu/assert";
import { useDecisionCache } from "../../../lib/caching/useDecisionCache.js";
import { apiSlots } from "../../../lib/kube/apiSlots.js";
import { isSpareSlotCall, serviceAccountPrincipal, sharedPrincipal, type PortCall, type Principal, type UseAuthorizer, type UseDecision } from "../../../lib/gmsa/ports.js";
import { countRequest, withRequestCounters } from "../../../lib/observability/requestCounters.js";

interface Context {
  clock: number;
  asked: number;
  answer: UseDecision;
  gate?: Promise<void>;
  cached: UseAuthorizer;
}

const Cache = suite<Context>("useDecisionCache");
const signal = new AbortController().signal;
const web = serviceAccountPrincipal("apps", "web");

Cache.before.each((context) => {
  context.clock = 0;
  context.asked = 0;
  context.answer = { allowed: true };
  context.gate = undefined;
  const inner: UseAuthorizer = {
    mayUse: async () => {
      context.asked++;
      await context.gate;
      return context.answer;
    },
  };
  context.cached = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock });
});

Cache("reuses a grant within its TTL and asks again after it", async (context) => {
  await context.cached.mayUse(web, "apps", "spec", { signal });
  // Not used in the last fifth of its life: nothing is asked ahead of its expiry.
  context.clock = 3999;
  await context.cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 1);
  context.clock = 5000;
  await context.cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 2);
});

Cache("keeps a denial for a fifth of the TTL only", async (context) => {
  context.answer = { allowed: false };
  await context.cached.mayUse(web, "apps", "spec", { signal });
  context.clock = 799;
  assert.is((await context.cached.mayUse(web, "apps", "spec", { signal })).allowed, false);
  context.answer = { allowed: true };
  context.clock = 1000;
  assert.is((await context.cached.mayUse(web, "apps", "spec", { signal })).allowed, true);
  assert.is(context.asked, 2);
});

Cache("tells principals, namespaces and specs apart", async (context) => {
  const other: Principal = serviceAccountPrincipal("apps", "other");
  await context.cached.mayUse(web, "apps", "spec", { signal });
  await context.cached.mayUse(other, "apps", "spec", { signal });
  await context.cached.mayUse(web, "apps", "spec-2", { signal });
  await context.cached.mayUse({ ...web, groups: [...web.groups, "extra"] }, "apps", "spec", { signal });
  await context.cached.mayUse({ user: "alice", groups: [] }, "other-ns", "spec", { signal });
  assert.is(context.asked, 5);
});

Cache("a principal the policy shares is keyed once; any other as it reads now, even frozen", async (context) => {
  const groups = ["system:authenticated"];
  const mutable: Principal = { user: "alice", groups };
  await context.cached.mayUse(mutable, "apps", "spec", { signal });
  groups.push("payroll-admins");
  await context.cached.mayUse(mutable, "apps", "spec", { signal });
  assert.is(context.asked, 2, "a principal whose groups changed was answered from the cache");
  const shared = sharedPrincipal({ user: "bob", groups: ["system:authenticated"] });
  await context.cached.mayUse(shared, "apps", "spec", { signal });
  await context.cached.mayUse(shared, "apps", "spec", { signal });
  // An equal principal made afresh shares its answer: the key is what the principal says.
  await context.cached.mayUse({ user: "bob", groups: ["system:authenticated"] }, "apps", "spec", { signal });
  assert.is(context.asked, 3);
  // Frozen, but not made by sharedPrincipal: a getter can still change what it says.
  let who = "carol";
  const frozen: Principal = Object.freeze({
    get user() {
      return who;
    },
    groups: Object.freeze(["system:authenticated"]),
  });
  await context.cached.mayUse(frozen, "apps", "spec", { signal });
  who = "mallory";
  await context.cached.mayUse(frozen, "apps", "spec", { signal });
  assert.is(context.asked, 5, "a frozen principal that changed was answered from the cache");
});

Cache("a shared principal is a frozen copy: changing what it was made from changes neither it nor its answers", async (context) => {
  const extra: Record<string, string[]> = { "example.com/team": ["payroll"] };
  const groups = ["system:authenticated"];
  const made: Principal = { user: "dave", uid: "u-7", groups, extra };
  const shared = sharedPrincipal(made);
  assert.ok(Object.isFrozen(shared) && Object.isFrozen(shared.groups) && Object.isFrozen(shared.extra) && Object.isFrozen(shared.extra!["example.com/team"]));
  await context.cached.mayUse(shared, "apps", "spec", { signal });
  groups.push("system:masters");
  extra["example.com/team"]!.push("admins");
  assert.equal([...shared.groups], ["system:authenticated"]);
  assert.equal([...shared.extra!["example.com/team"]!], ["payroll"]);
  await context.cached.mayUse(shared, "apps", "spec", { signal });
  assert.is(context.asked, 1);
  // What it was made from now says something else, and is asked about on its own.
  await context.cached.mayUse(made, "apps", "spec", { signal });
  assert.is(context.asked, 2);
});

Cache("concurrent identical questions share one review", async (context) => {
  let open!: () => void;
  context.gate = new Promise((resolve) => (open = resolve));
  const answers = Promise.all(Array.from({ length: 10 }, () => context.cached.mayUse(web, "apps", "spec", { signal })));
  open();
  assert.is((await answers).length, 10);
  assert.is(context.asked, 1);
});

Cache("does not keep failures", async (context) => {
  let fail = true;
  const cached = useDecisionCache(
    {
      mayUse: async () => {
        context.asked++;
        if (fail) throw new Error("unreachable");
        return { allowed: true };
      },
    },
    { ttlMs: 5000, now: () => context.clock },
  );
  try {
    await cached.mayUse(web, "apps", "spec", { signal });
    assert.unreachable();
  } catch (error) {
    assert.match((error as Error).message, /unreachable/);
  }
  fail = false;
  assert.is((await cached.mayUse(web, "apps", "spec", { signal })).allowed, true);
  assert.is(context.asked, 2);
});

/** A budget as an admission has one: a timer that keeps the process alive until it fires. */
function budget(ms: number): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(Object.assign(new Error(`budget of ${ms} ms spent`), { name: "TimeoutError" })), ms);
  return controller.signal;
}

/** An authorizer that waits until its signal aborts, and says whether it saw the abort. */
function stallingAuthorizer(context: Context, seen: { aborted: number }): UseAuthorizer {
  return {
    mayUse: (_principal, _namespace, _name, review) => {
      context.asked++;
      return new Promise((_, reject) =>
        review.signal.addEventListener("abort", () => {
          seen.aborted++;
          reject(new Error("review stopped"));
        }),
      );
    },
  };
}

Cache("a shared review is stopped when the last admission waiting on it gives up", async (context) => {
  const seen = { aborted: 0 };
  const cached = useDecisionCache(stallingAuthorizer(context, seen), { ttlMs: 5000 });
  const first = new AbortController();
  const second = new AbortController();
  const waits = [first, second].map((c) =>
    cached.mayUse(web, "apps", "spec", { signal: c.signal }).then(
      () => "answered",
      () => "gave up",
    ),
  );
  first.abort(new Error("first budget spent"));
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(seen.aborted, 0, "still running for the admission that waits");
  second.abort(new Error("second budget spent"));
  assert.equal(await Promise.all(waits), ["gave up", "gave up"]);
  assert.is(seen.aborted, 1, "stopped with its last waiter");
  assert.is(context.asked, 1);
});

Cache("after a stalled review is given up, the next admission asks afresh", async (context) => {
  let stall = true;
  const seen = { aborted: 0 };
  const stalling = stallingAuthorizer(context, seen);
  const cached = useDecisionCache({ mayUse: (p, n, c, s) => (stall ? stalling.mayUse(p, n, c, s) : (context.asked++, Promise.resolve({ allowed: true }))) }, { ttlMs: 5000 });
  try {
    await cached.mayUse(web, "apps", "spec", { signal: budget(30) });
    assert.unreachable("gave up");
  } catch (error) {
    assert.is((error as Error).name, "TimeoutError");
  }
  stall = false;
  assert.equal(await cached.mayUse(web, "apps", "spec", { signal: budget(500) }), { allowed: true });
  assert.is(context.asked, 2);
});

Cache("an admission that joins a shared review keeps it alive, and gets its answer", async (context) => {
  let open!: () => void;
  context.gate = new Promise((resolve) => (open = resolve));
  const early = new AbortController();
  const first = context.cached.mayUse(web, "apps", "spec", { signal: early.signal }).catch(() => "gave up");
  const second = context.cached.mayUse(web, "apps", "spec", { signal });
  early.abort(new Error("budget spent"));
  open();
  assert.is(await first, "gave up");
  assert.equal(await second, { allowed: true });
  assert.is(context.asked, 1);
});

Cache("admissions joining a review count as waiting on the API server: past the bound one is refused at once, and the count falls when the review answers", async (context) => {
  let open!: () => void;
  context.gate = new Promise((resolve) => (open = resolve));
  const slots = apiSlots(1, 1);
  const cached = useDecisionCache(
    { mayUse: async () => (context.asked++, await context.gate, context.answer) },
    { ttlMs: 5000, now: () => context.clock, hold: (call) => slots.hold(call) },
  );
  const [a, b, c] = [0, 1, 2].map(() => new AbortController().signal);
  const first = cached.mayUse(web, "apps", "spec", { signal: a! });
  const second = cached.mayUse(web, "apps", "spec", { signal: b! });
  try {
    await cached.mayUse(web, "apps", "spec", { signal: c! });
    assert.unreachable("a third admission joined the stalled review");
  } catch (error) {
    assert.match(String(error), /backed up/);
  }
  assert.is(context.asked, 1);
  open();
  assert.equal(await Promise.all([first, second]), [{ allowed: true }, { allowed: true }]);
  assert.is(slots.held, 0);
});

Cache("a review its waiters hold the server for holds nothing more itself; without a hold to take, it is counted as any call", async (context) => {
  const slots = apiSlots(1, 1);
  let heldDuringReview = -1;
  // The review's own call, as callApi makes it: a hold of the call it is given.
  const inner: UseAuthorizer = {
    mayUse: async (_principal, _namespace, _name, review) => {
      const leave = slots.hold(review);
      heldDuringReview = slots.held;
      leave();
      return context.answer;
    },
  };
  const held = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock, hold: (call) => slots.hold(call) });
  await held.mayUse(web, "apps", "spec", { signal: new AbortController().signal });
  assert.is(heldDuringReview, 1, "the waiting admission, and not the review again");
  const unheld = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock });
  await unheld.mayUse(web, "apps", "other", { signal: new AbortController().signal });
  assert.is(heldDuringReview, 1, "no waiter holds: the review's call is counted");
  assert.is(slots.held, 0);
});

Cache("a TTL of 0 asks every time", async (context) => {
  const inner: UseAuthorizer = { mayUse: async () => (context.asked++, { allowed: true }) };
  const cached = useDecisionCache(inner, { ttlMs: 0 });
  await cached.mayUse(web, "apps", "spec", { signal });
  await cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 2);
});

Cache('a question in namespace "" is bounded like any other namespace', async () => {
  const slots = apiSlots(1, 1);
  const cached = useDecisionCache({ mayUse: () => new Promise<never>(() => {}) }, { ttlMs: 5000, hold: (call) => slots.hold(call) });
  let refused = 0;
  for (let i = 0; i < 6; i++) cached.mayUse(web, "", `spec-${i}`, { signal: new AbortController().signal }).catch(() => refused++);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal([slots.held, refused], [2, 4]);
});

Cache("an answer used in the last fifth of its life is asked again ahead of its expiry, once; after it, admissions find the new answer", async (context) => {
  await context.cached.mayUse(web, "apps", "spec", { signal });
  context.clock = 4000;
  await context.cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 2, "asked again ahead of the expiry");
  await new Promise((resolve) => setImmediate(resolve));
  context.clock = 4500;
  await context.cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 2, "once");
  // The answer asked at 4000 lasts until 9000.
  context.clock = 8999;
  assert.equal(await context.cached.mayUse(web, "apps", "spec", { signal }), { allowed: true });
  assert.is(context.asked, 3, "the new answer, used in its own last fifth, is asked ahead in turn");
});

Cache("the review asked ahead holds no admission; a team's admissions past its namespace's share after the expiry are answered, not refused", async (context) => {
  // One call and one more admission may wait per namespace: two.
  const slots = apiSlots(1, 1);
  let heldDuringReview = -1;
  const inner: UseAuthorizer = { mayUse: async () => (context.asked++, (heldDuringReview = slots.held), context.answer) };
  const cached = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock, hold: (call) => slots.hold(call) });
  const admission = () => ({ signal: new AbortController().signal, namespace: "apps" });
  await cached.mayUse(web, "apps", "spec", admission());
  context.clock = 4500;
  await cached.mayUse(web, "apps", "spec", admission());
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(context.asked, 2);
  assert.is(heldDuringReview, 0, "nobody is held for the review asked ahead");
  // Past the first answer's expiry, six admissions of the namespace at once.
  context.clock = 5500;
  const burst = await Promise.all(Array.from({ length: 6 }, () => cached.mayUse(web, "apps", "spec", admission())));
  assert.equal(burst, Array(6).fill({ allowed: true }));
  assert.is(context.asked, 2);
  assert.is(slots.held, 0);
});

Cache("a grant revoked meanwhile: the denial asked ahead replaces it as soon as it arrives", async (context) => {
  await context.cached.mayUse(web, "apps", "spec", { signal });
  context.answer = { allowed: false };
  context.clock = 4200;
  assert.equal(await context.cached.mayUse(web, "apps", "spec", { signal }), { allowed: true }, "the grant still within its TTL");
  await new Promise((resolve) => setImmediate(resolve));
  context.clock = 4300;
  assert.equal(await context.cached.mayUse(web, "apps", "spec", { signal }), { allowed: false });
  assert.is(context.asked, 2);
});

Cache("a review asked ahead that fails leaves the answer to expire as before; one still on its way at the expiry is joined, not asked again", async (context) => {
  let fail = true;
  let open!: () => void;
  const inner: UseAuthorizer = {
    mayUse: async () => {
      context.asked++;
      if (context.asked === 2 && fail) throw new Error("the API server failed");
      await context.gate;
      return context.answer;
    },
  };
  const cached = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock });
  await cached.mayUse(web, "apps", "spec", { signal });
  context.clock = 4500;
  await cached.mayUse(web, "apps", "spec", { signal });
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(context.asked, 2);
  context.clock = 5000;
  assert.equal(await cached.mayUse(web, "apps", "spec", { signal }), { allowed: true });
  assert.is(context.asked, 3, "asked when the answer expired");
  // Asked ahead again, and still on its way when that answer expires.
  fail = false;
  context.gate = new Promise((resolve) => (open = resolve));
  context.clock = 9500;
  await cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 4);
  context.clock = 10_000;
  const joined = cached.mayUse(web, "apps", "spec", { signal: new AbortController().signal });
  open();
  assert.equal(await joined, { allowed: true });
  assert.is(context.asked, 4, "the admission joined the review already asked");
});

Cache("at most two reviews asked ahead are under way at once; past that an answer expires as before", async (context) => {
  const names = ["one", "two", "three", "four", "five"];
  for (const name of names) await context.cached.mayUse(web, "apps", name, { signal });
  let open!: () => void;
  context.gate = new Promise((resolve) => (open = resolve));
  context.clock = 4500;
  for (const name of names) await context.cached.mayUse(web, "apps", name, { signal });
  assert.is(context.asked, names.length + 2);
  open();
  await new Promise((resolve) => setImmediate(resolve));
  // Room again: the next answer used in its last fifth is asked ahead.
  await context.cached.mayUse(web, "apps", "three", { signal });
  assert.is(context.asked, names.length + 3);
});

Cache("a review asked ahead still on its way when the answer it replaces expires goes on, and its answer is kept", async (context) => {
  await context.cached.mayUse(web, "apps", "spec", { signal });
  let open!: () => void;
  context.gate = new Promise((resolve) => (open = resolve));
  // Used in the last millisecond of its life: the review asked ahead outlives it by far.
  context.clock = 4999;
  await context.cached.mayUse(web, "apps", "spec", { signal });
  assert.is(context.asked, 2);
  await new Promise((resolve) => setTimeout(resolve, 30));
  context.clock = 5100;
  open();
  await new Promise((resolve) => setImmediate(resolve));
  context.clock = 5200;
  assert.equal(await context.cached.mayUse(web, "apps", "spec", { signal }), { allowed: true });
  assert.is(context.asked, 2, "the answer asked ahead, kept though it came after the expiry");
  // It lives its TTL from when it answered (5 100), not from when it was asked (4 999): at 9 600
  // it is still used, though what the server would say now is a denial.
  context.answer = { allowed: false };
  context.gate = new Promise((resolve) => (open = resolve));
  context.clock = 9600;
  assert.equal(await context.cached.mayUse(web, "apps", "spec", { signal }), { allowed: true });
  open();
});

Cache("a review asked ahead takes an API slot only when one is free: with every slot busy it is not queued, and the answer expires as before", async (context) => {
  const slots = apiSlots(1, 1);
  const inner: UseAuthorizer = {
    mayUse: async (_principal, _namespace, _name, call) => {
      const release = await slots.take(call);
      try {
        context.asked++;
        return context.answer;
      } finally {
        release();
      }
    },
  };
  const cached = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock, hold: (call) => slots.hold(call) });
  await cached.mayUse(web, "apps", "spec", { signal: new AbortController().signal, namespace: "apps" });
  // Another team's call has the only slot.
  const busy = await slots.take({ signal: new AbortController().signal, namespace: "other" });
  context.clock = 4500;
  assert.equal(await cached.mayUse(web, "apps", "spec", { signal: new AbortController().signal, namespace: "apps" }), { allowed: true });
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(slots.waiting, 0, "no review asked ahead waits for the slot");
  assert.is(context.asked, 1);
  busy();
  context.clock = 5000;
  await cached.mayUse(web, "apps", "spec", { signal: new AbortController().signal, namespace: "apps" });
  assert.is(context.asked, 2, "asked when the answer expired, as without the review asked ahead");
});

Cache("a budget for reviews asked ahead that is no time is refused when the cache is made", () => {
  for (const aheadBudgetMs of [Number.NaN, Number.POSITIVE_INFINITY, 0, -5]) {
    assert.throws(() => useDecisionCache({ mayUse: async () => ({ allowed: true }) }, { ttlMs: 5000, aheadBudgetMs }), /budget of a review asked ahead/);
  }
});

Cache("a review asked ahead that an admission joins after the expiry queues for slots from then on, as that admission's own would", async (context) => {
  const calls: PortCall[] = [];
  let open!: () => void;
  const inner: UseAuthorizer = {
    mayUse: async (_principal, _namespace, _name, call) => {
      calls.push(call);
      context.asked++;
      await context.gate;
      return context.answer;
    },
  };
  const cached = useDecisionCache(inner, { ttlMs: 5000, now: () => context.clock, hold: () => () => {} });
  await cached.mayUse(web, "apps", "spec", { signal, namespace: "apps" });
  context.gate = new Promise((resolve) => (open = resolve));
  context.clock = 4500;
  await cached.mayUse(web, "apps", "spec", { signal, namespace: "apps" });
  const ahead = calls[1]!;
  assert.ok(isSpareSlotCall(ahead), "nobody waits on it: only a free slot");
  context.clock = 5000;
  const joined = cached.mayUse(web, "apps", "spec", { signal: new AbortController().signal, namespace: "apps" });
  assert.not.ok(isSpareSlotCall(ahead), "an admission waits on it: it may queue");
  open();
  assert.equal(await joined, { allowed: true });
  assert.is(context.asked, 2);
});

Cache.run();

/** What each admission's record counts: by the signal it hands the ports, joined reviews included. */
const Counting = suite("useDecisionCache: what an admission's counters say");

Counting("the admission that asks a review counts its API call; one that joins it counts a miss and no call; a hit counts a hit", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  // Stands for the Kubernetes adapter: it counts its call under the signal it is handed.
  const inner: UseAuthorizer = {
    mayUse: async (_principal, _namespace, _name, review) => {
      countRequest("apiCalls", review.signal);
      await gate;
      return { allowed: true };
    },
  };
  const cached = useDecisionCache(inner, { ttlMs: 5000 });
  const first = new AbortController().signal;
  const second = new AbortController().signal;
  const third = new AbortController().signal;
  const asking = withRequestCounters(first, () => cached.mayUse(web, "apps", "spec", { signal: first }));
  const joining = withRequestCounters(second, () => cached.mayUse(web, "apps", "spec", { signal: second }));
  release();
  const [asked, joined] = await Promise.all([asking, joining]);
  const hit = await withRequestCounters(third, () => cached.mayUse(web, "apps", "spec", { signal: third }));
  assert.equal(asked.counters, { apiCalls: 1, apiErrors: 0, cacheHits: 0, cacheMisses: 1 });
  assert.equal(joined.counters, { apiCalls: 0, apiErrors: 0, cacheHits: 0, cacheMisses: 1 });
  assert.equal(hit.counters, { apiCalls: 0, apiErrors: 0, cacheHits: 1, cacheMisses: 0 });
});

Counting.run();
