import { getEventListeners } from "node:events";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";
import { sharedWorkCall, spareSlotCall, type PortCall } from "../../../lib/gmsa/ports.js";
import { apiSlots } from "../../../lib/kube/apiSlots.js";

const Slots = suite("apiSlots");

const turn = () => new Promise((resolve) => setImmediate(resolve));

Slots("grants up to the limit at once and hands each released slot to one waiter", async () => {
  const slots = apiSlots(2);
  const signal = new AbortController().signal;
  const first = await slots.take({ signal });
  await slots.take({ signal });
  let third = false;
  const waiting = slots.take({ signal }).then((release) => ((third = true), release));
  await turn();
  assert.equal([slots.inUse, slots.waiting, third], [2, 1, false]);
  first();
  first(); // a second release of the same slot changes nothing
  (await waiting)();
  assert.equal([slots.inUse, slots.waiting, third], [1, 0, true]);
});

Slots("an admission with many waiting calls does not hold another behind all of them", async () => {
  const slots = apiSlots(1);
  const big = new AbortController().signal;
  const small = new AbortController().signal;
  const order: string[] = [];
  const release = await slots.take({ signal: big });
  // Each call, once it has its slot, gives it back a turn later.
  const serve = (name: string) => (done: () => void) => {
    order.push(name);
    setImmediate(done);
  };
  const waits = [...Array.from({ length: 5 }, (_, i) => slots.take({ signal: big }).then(serve(`big-${i}`))), slots.take({ signal: small }).then(serve("small"))];
  release();
  await Promise.all(waits);
  assert.is(order.indexOf("small"), 1, `served in the order ${order.join(", ")}`);
  assert.is(order.length, 6);
});

Slots("a namespace with many admissions waiting does not hold another namespace behind all of them", async () => {
  const slots = apiSlots(1);
  const of = (namespace: string) => ({ signal: new AbortController().signal, namespace });
  const order: string[] = [];
  const serve = (name: string) => (done: () => void) => {
    order.push(name);
    setImmediate(done);
  };
  const release = await slots.take(of("team-a"));
  // Six admissions (or shared reviews) of team-a wait, one call each, then one of team-b, then team-a's again.
  const teamA = Array.from({ length: 6 }, (_, i) => slots.take(of("team-a")).then(serve(`a-${i}`)));
  const teamB = [slots.take(of("team-b")).then(serve("b-0")), slots.take(of("team-b")).then(serve("b-1"))];
  release();
  await Promise.all([...teamA, ...teamB]);
  assert.is(order.indexOf("b-0"), 1, `served in the order ${order.join(", ")}`);
  assert.is(order.indexOf("b-1"), 3, `served in the order ${order.join(", ")}`);
  assert.is(order.length, 8);
});

Slots("a namespace whose last waiting admission gives up leaves the turn to the others", async () => {
  const slots = apiSlots(1);
  const hold = await slots.take({ signal: new AbortController().signal });
  const gone = new AbortController();
  const stays = new AbortController().signal;
  const lost = slots.take({ signal: gone.signal, namespace: "team-a" }).then(
    () => "granted",
    (e: unknown) => (e as Error).message,
  );
  const kept = slots.take({ signal: stays, namespace: "team-b" }).then((release) => (release(), "granted"));
  gone.abort(new Error("budget spent"));
  assert.is(await lost, "budget spent");
  hold();
  assert.is(await kept, "granted");
  assert.equal([slots.inUse, slots.waiting], [0, 0]);
  // team-a waits again, afresh, and is served.
  (await slots.take({ signal: new AbortController().signal, namespace: "team-a" }))();
  assert.equal([slots.inUse, slots.waiting], [0, 0]);
});

Slots("a waiter whose admission gives up leaves at once, with all of that admission's calls", async () => {
  const slots = apiSlots(1);
  const hold = await slots.take({ signal: new AbortController().signal });
  const admission = new AbortController();
  const outcomes = Array.from({ length: 3 }, () =>
    slots.take({ signal: admission.signal }).then(
      () => "granted",
      (e: unknown) => (e as Error).message,
    ),
  );
  assert.is(slots.waiting, 3);
  admission.abort(new Error("budget spent"));
  assert.equal(await Promise.all(outcomes), ["budget spent", "budget spent", "budget spent"]);
  assert.is(slots.waiting, 0);
  hold();
  assert.is(slots.inUse, 0, "the released slot went to nobody");
});

Slots("leaves no listener behind on a signal whose calls were all served", async () => {
  const slots = apiSlots(1);
  const signal = new AbortController().signal;
  for (let round = 0; round < 20; round++) {
    const hold = await slots.take({ signal });
    const waiting = slots.take({ signal });
    hold();
    (await waiting)();
  }
  assert.is(getEventListeners(signal, "abort").length, 0);
});

Slots("past its calls in flight and those that may wait, a namespace's new admission is refused at once; one already waiting goes on", () => {
  const slots = apiSlots(2, 1);
  const admissions = Array.from({ length: 4 }, () => new AbortController().signal);
  const leaves = admissions.slice(0, 3).map((signal) => slots.hold({ signal: signal, namespace: "team-a" }));
  assert.is(slots.held, 3);
  try {
    slots.hold({ signal: admissions[3]!, namespace: "team-a" });
    assert.unreachable("a fourth admission was let wait");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
    assert.is((error as ClusterUnavailableError).failure, "backedUp");
    assert.match((error as Error).message, /the cluster's API calls are backed up: 3 admissions of namespace "team-a"/);
  }
  // The first admission's second call is not a new admission.
  const again = slots.hold({ signal: admissions[0]!, namespace: "team-a" });
  leaves[0]!();
  assert.is(slots.held, 3, "an admission with a call still under way is still counted");
  again();
  again(); // leaving twice changes nothing
  assert.is(slots.held, 2);
  slots.hold({ signal: admissions[3]!, namespace: "team-a" })();
  assert.is(slots.held, 2);
});

Slots("with no admission allowed to wait, only those whose calls fit in the slots may go on", () => {
  const slots = apiSlots(1, 0);
  slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-a" }), /backed up/);
});

Slots("one namespace that fills its share leaves another namespace's admissions waiting their turn, not refused", () => {
  const slots = apiSlots(2, 1);
  for (let i = 0; i < 3; i++) slots.hold({ signal: new AbortController().signal, namespace: "flood" });
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "flood" }), /backed up/);
  const other = slots.hold({ signal: new AbortController().signal, namespace: "other-team" });
  assert.is(slots.held, 4);
  other();
  assert.is(slots.held, 3);
});

Slots("all namespaces together are bounded at four times one namespace's share; past it only a namespace holding nothing may wait, up to twice that", () => {
  const slots = apiSlots(2, 1);
  const perNamespace = 3;
  for (let n = 0; n < 4; n++) for (let i = 0; i < perNamespace; i++) slots.hold({ signal: new AbortController().signal, namespace: `team-${n}` });
  assert.is(slots.held, 12);
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-0" }), /3 admissions of namespace "team-0"/);
  // Twelve more namespaces, one admission each: each held nothing when it came.
  for (let n = 0; n < 12; n++) slots.hold({ signal: new AbortController().signal, namespace: `newcomer-${n}` });
  assert.is(slots.held, 24);
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "one-too-many" }), /24 admissions already wait/);
  assert.throws(() => slots.hold({ signal: new AbortController().signal }), /24 admissions already wait/, "no namespace is no way past it");
  assert.throws(
    () => slots.hold({ signal: new AbortController().signal, namespace: "newcomer-0" }),
    /backed up/,
    "a newcomer that now holds one is past the room kept for newcomers",
  );
});

Slots("the cluster's share of the instance is never exceeded, not even by a newcomer namespace; one namespace's slow admissions take at most half of it", () => {
  // A burst, however prompt, leaves a quarter of the share to other namespaces.
  const burst = apiSlots(16, 16, { maxHeldAtAll: 6, now: () => 0 });
  for (let i = 0; i < 5; i++) burst.hold({ signal: new AbortController().signal, namespace: "team-a" });
  assert.throws(() => burst.hold({ signal: new AbortController().signal, namespace: "team-a" }), /5 admissions of namespace "team-a" already wait/);
  burst.hold({ signal: new AbortController().signal, namespace: "team-b" });
  let clock = 0;
  const slots = apiSlots(16, 16, { maxHeldAtAll: 6, slowAfterMs: 250, now: () => clock });
  // A burst the server answers promptly is not held to the half...
  for (let i = 0; i < 4; i++) slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
  assert.is(slots.held, 4);
  // ...but once three of them have waited past a prompt answer, the namespace gets no more.
  clock = 300;
  assert.throws(
    () => slots.hold({ signal: new AbortController().signal, namespace: "team-a" }),
    /4 admissions of namespace "team-a" have waited more than 250 ms/,
    "half of the share",
  );
  slots.hold({ signal: new AbortController().signal, namespace: "team-b" });
  slots.hold({ signal: new AbortController().signal, namespace: "team-c" });
  assert.is(slots.held, 6);
  assert.throws(
    () => slots.hold({ signal: new AbortController().signal, namespace: "newcomer" }),
    /6 admissions already wait .*at most 6 of an instance's concurrent requests wait on one cluster/,
  );
  assert.throws(() => slots.hold({ signal: new AbortController().signal }), /backed up/);
});

Slots("a share of one still lets one admission wait", () => {
  const slots = apiSlots(4, 4, { maxHeldAtAll: 1 });
  const leave = slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-b" }), /backed up/);
  leave();
  slots.hold({ signal: new AbortController().signal, namespace: "team-b" });
  assert.is(slots.held, 1);
});

Slots("calls that carry no namespace are bounded together, as one more namespace", () => {
  const slots = apiSlots(1, 0);
  slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-a" }), /1 admissions of namespace "team-a"/);
  // No namespace, or an empty one: neither team-a's count nor unbounded.
  slots.hold({ signal: new AbortController().signal });
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "" }), /1 admissions of namespace ""/);
  assert.throws(() => slots.hold({ signal: new AbortController().signal }), /1 admissions of namespace ""/);
  assert.is(slots.held, 2);
});

Slots("a namespace's count falls when its admission's last call settles, whichever hold settles last", () => {
  const slots = apiSlots(1, 0);
  const signal = new AbortController().signal;
  const first = slots.hold({ signal: signal, namespace: "team-a" });
  const second = slots.hold({ signal: signal, namespace: "team-a" });
  first();
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-a" }), /backed up/, "still counted while its second call runs");
  second();
  slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
});

Slots("work its waiters hold the server for takes no hold of its own, and is never refused one; a copy of its call is no such work", () => {
  const slots = apiSlots(1, 0);
  slots.hold({ signal: new AbortController().signal, namespace: "team-a" });
  const shared = sharedWorkCall(new AbortController().signal, "team-a");
  const leave = slots.hold(shared);
  assert.is(slots.held, 1);
  leave();
  assert.is(slots.held, 1);
  // Calls of no namespace that are not shared work are bounded as the namespace "".
  slots.hold({ signal: new AbortController().signal });
  assert.throws(() => slots.hold({ signal: new AbortController().signal }), /1 admissions of namespace ""/);
  slots.hold(shared)();
  // Only the call sharedWorkCall made skips the bound: a copy of it, or a look-alike, is counted.
  assert.throws(() => slots.hold({ ...shared, signal: new AbortController().signal }), /backed up/);
  assert.throws(() => slots.hold({ signal: new AbortController().signal, namespace: "team-a", sharedByWaiters: true } as PortCall), /backed up/);
});

Slots("work no admission waits on takes a slot only when one is free at once, and is refused, not queued, when none is", async () => {
  const slots = apiSlots(1, 1);
  const release = await slots.take({ signal: new AbortController().signal, namespace: "team-a" });
  let waitedOn = false;
  const spare = spareSlotCall(new AbortController().signal, "team-a", () => !waitedOn);
  await slots.take(spare).then(
    () => assert.unreachable("a spare-slot call waited for, or took, a busy slot"),
    (error: unknown) => assert.instance(error, ClusterUnavailableError),
  );
  assert.is(slots.waiting, 0, "it took no place in the queue");
  release();
  const taken = await slots.take(spare);
  assert.is(slots.inUse, 1);
  taken();
  // It holds nothing either, like any work its waiters share.
  slots.hold(spare)();
  assert.is(slots.held, 0);
  // Once an admission waits on it, it queues in its namespace's turn like any shared work.
  const again = await slots.take({ signal: new AbortController().signal, namespace: "team-b" });
  waitedOn = true;
  let granted = false;
  const queued = slots.take(spare).then((release) => ((granted = true), release));
  await turn();
  assert.equal([slots.waiting, granted], [1, false]);
  again();
  (await queued)();
  assert.is(slots.inUse, 0);
});

Slots.run();
