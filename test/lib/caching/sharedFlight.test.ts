import { suite } from "uvu";
import * as assert from "uvu/assert";
import { sharedFlight } from "../../../lib/caching/sharedFlight.js";

/** Work that answers when told to, and records the signal it was started with. */
function controlled<T>() {
  const started: AbortSignal[] = [];
  let settle: { resolve: (value: T) => void; reject: (error: unknown) => void } | undefined;
  const start = (stop: AbortSignal) => {
    started.push(stop);
    return new Promise<T>((resolve, reject) => (settle = { resolve, reject }));
  };
  return { start, started, resolve: (value: T) => settle!.resolve(value), reject: (error: unknown) => settle!.reject(error) };
}

const outcome = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
  );

const tick = () => new Promise((resolve) => setImmediate(resolve));
const Flight = suite("sharedFlight");

Flight("callers asking for one key together share one start; another key starts its own", async () => {
  const flight = sharedFlight<string>();
  const a = controlled<string>();
  const b = controlled<string>();
  const answers = [
    flight.join("a", new AbortController().signal, a.start),
    flight.join("a", new AbortController().signal, a.start),
    flight.join("b", new AbortController().signal, b.start),
  ];
  assert.is(a.started.length, 1);
  assert.is(b.started.length, 1);
  a.resolve("A");
  b.resolve("B");
  assert.equal(await Promise.all(answers), ["A", "A", "B"]);
});

Flight("settled work is forgotten: the next caller starts it again, after an answer and after a failure alike", async () => {
  const flight = sharedFlight<string>();
  const work = controlled<string>();
  const first = flight.join("k", new AbortController().signal, work.start);
  work.resolve("one");
  assert.is(await first, "one");
  const second = outcome(flight.join("k", new AbortController().signal, work.start));
  const joined = outcome(flight.join("k", new AbortController().signal, work.start));
  work.reject(new Error("503"));
  assert.equal([await second, await joined], [{ error: "503" }, { error: "503" }]);
  const third = flight.join("k", new AbortController().signal, work.start);
  assert.is(work.started.length, 3);
  work.resolve("three");
  assert.is(await third, "three");
});

Flight("a caller that gives up leaves the work to the others; when the last gives up it is stopped, and the next starts afresh", async () => {
  const flight = sharedFlight<string>();
  const work = controlled<string>();
  const one = new AbortController();
  const two = new AbortController();
  const three = new AbortController();
  const first = outcome(flight.join("k", one.signal, work.start));
  const second = outcome(flight.join("k", two.signal, work.start));
  one.abort(new Error("budget one"));
  assert.equal(await first, { error: "budget one" });
  assert.is(work.started[0]!.aborted, false, "still waited on");
  two.abort(new Error("budget two"));
  assert.equal(await second, { error: "budget two" });
  assert.is(work.started[0]!.aborted, true, "nobody waits any more");
  const next = flight.join("k", three.signal, work.start);
  assert.is(work.started.length, 2);
  work.resolve("fresh");
  assert.is(await next, "fresh");
});

Flight("a caller that has given up already starts and joins nothing", async () => {
  const flight = sharedFlight<string>();
  const work = controlled<string>();
  const gone = new AbortController();
  gone.abort(new Error("spent"));
  let left = 0;
  assert.equal(await outcome(flight.join("k", gone.signal, work.start, () => left++)), { error: "spent" });
  assert.is(work.started.length, 0);
  assert.is(left, 1);
  // Nor does it stop work already in flight that others wait on.
  const waiting = flight.join("k", new AbortController().signal, work.start);
  assert.equal(await outcome(flight.join("k", gone.signal, work.start)), { error: "spent" });
  assert.is(work.started[0]!.aborted, false);
  work.resolve("kept");
  assert.is(await waiting, "kept");
});

Flight("work that throws as it starts fails its caller and is not kept", async () => {
  const flight = sharedFlight<string>();
  let left = 0;
  const broken = () => {
    throw new Error("cannot start");
  };
  assert.equal(await outcome(flight.join("k", new AbortController().signal, broken, () => left++)), { error: "cannot start" });
  assert.is(left, 1);
  const work = controlled<string>();
  const next = flight.join("k", new AbortController().signal, work.start);
  assert.is(work.started.length, 1);
  work.resolve("ok");
  assert.is(await next, "ok");
});

Flight("each caller leaves once, whether answered or given up", async () => {
  const flight = sharedFlight<string>();
  const work = controlled<string>();
  const left: string[] = [];
  const quitter = new AbortController();
  const answered = flight.join("k", new AbortController().signal, work.start, () => left.push("answered"));
  const gaveUp = outcome(flight.join("k", quitter.signal, work.start, () => left.push("gave up")));
  quitter.abort(new Error("spent"));
  await gaveUp;
  work.resolve("v");
  await answered;
  await tick();
  assert.equal(left.sort(), ["answered", "gave up"]);
});

Flight.run();
