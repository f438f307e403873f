import { getEventListeners } from "node:events";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { apiSlots } from "../../../lib/kube/apiSlots.js";

const Slots = suite("apiSlots");

const turn = () => new Promise((resolve) => setImmediate(resolve));

Slots("grants up to the limit at once and hands each released slot to one waiter", async () => {
  const slots = apiSlots(2);
  const signal = new AbortController().signal;
  const first = await slots.take(signal);
  await slots.take(signal);
  let third = false;
  const waiting = slots.take(signal).then((release) => ((third = true), release));
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
  const release = await slots.take(big);
  // Each call, once it has its slot, gives it back a turn later.
  const serve = (name: string) => (done: () => void) => {
    order.push(name);
    setImmediate(done);
  };
  const waits = [...Array.from({ length: 5 }, (_, i) => slots.take(big).then(serve(`big-${i}`))), slots.take(small).then(serve("small"))];
  release();
  await Promise.all(waits);
  assert.is(order.indexOf("small"), 1, `served in the order ${order.join(", ")}`);
  assert.is(order.length, 6);
});

Slots("a waiter whose admission gives up leaves at once, with all of that admission's calls", async () => {
  const slots = apiSlots(1);
  const hold = await slots.take(new AbortController().signal);
  const admission = new AbortController();
  const outcomes = Array.from({ length: 3 }, () => slots.take(admission.signal).then(() => "granted", (e: unknown) => (e as Error).message));
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
    const hold = await slots.take(signal);
    const waiting = slots.take(signal);
    hold();
    (await waiting)();
  }
  assert.is(getEventListeners(signal, "abort").length, 0);
});

Slots.run();
