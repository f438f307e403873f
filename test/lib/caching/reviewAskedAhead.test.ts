import { setTimeout as sleep } from "node:timers/promises";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { useDecisionCache } from "../../../lib/caching/useDecisionCache.js";
import { serviceAccountPrincipal } from "../../../lib/gmsa/ports.js";
import type { ApiReply, ApiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import { apiSlots } from "../../../lib/kube/apiSlots.js";
import { useAuthorization } from "../../../lib/kube/useAuthorization.js";

/**
 * A `use` answer asked again ahead of its expiry, through the real access review, call and slot
 * code: with one API slot, the review asked ahead meets a failure and tries again while another
 * team's call has the slot.
 */
const Ahead = suite("a review asked ahead, through the API call and slot code");
const web = serviceAccountPrincipal("apps", "web");
const allowed: ApiReply = { status: 200, body: { status: { allowed: true } }, warnings: [] };
const unavailable: ApiReply = { status: 503, body: {}, warnings: [] };

function setup(replies: ApiReply[]) {
  let clock = 0;
  let sent = 0;
  const connection = { send: async () => (sent++, replies.shift() ?? allowed) } as unknown as ApiServerConnection;
  const slots = apiSlots(1, 10);
  const cached = useDecisionCache(useAuthorization(connection, { timeoutMs: 2000, budgetMs: 4000, slots }), {
    ttlMs: 5000,
    now: () => clock,
    hold: (call) => slots.hold(call),
  });
  const admission = (signal: AbortSignal = AbortSignal.timeout(3000)) => ({ signal, namespace: "apps" });
  return { cached, slots, admission, sent: () => sent, at: (time: number) => void (clock = time) };
}

/**
 * An answer asked ahead in its last fifth, whose review meets a 503 and waits to try again; then
 * another team's call takes the only slot and the answer expires. Gives that call's release.
 */
async function askedAheadThenExpired(t: ReturnType<typeof setup>): Promise<() => void> {
  await t.cached.mayUse(web, "apps", "spec", t.admission());
  t.at(4500);
  await t.cached.mayUse(web, "apps", "spec", t.admission());
  await sleep(20);
  const other = await t.slots.take({ signal: AbortSignal.timeout(3000), namespace: "other" });
  t.at(5000);
  return other;
}

Ahead("joined after the expiry, its next try waits for the busy slot and answers the admission", async () => {
  const t = setup([allowed, unavailable, allowed]);
  const other = await askedAheadThenExpired(t);
  const joined = t.cached.mayUse(web, "apps", "spec", t.admission());
  setTimeout(other, 400);
  assert.equal(await joined, { allowed: true });
  assert.is(t.sent(), 3);
  assert.is(t.slots.held, 0);
});

Ahead("an admission that has already given up joins nothing: the review's next try takes no place in the queue", async () => {
  const t = setup([allowed, unavailable, allowed]);
  const other = await askedAheadThenExpired(t);
  await t.cached.mayUse(web, "apps", "spec", t.admission(AbortSignal.abort(new Error("given up")))).catch(() => {});
  await sleep(250);
  assert.is(t.slots.waiting, 0, "nobody waits on it: it waits for no slot");
  other();
  await sleep(20);
  assert.is(t.slots.inUse, 0);
});

Ahead.run();
