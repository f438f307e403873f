import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { sharedFlight } from "../../lib/caching/sharedFlight.js";

/**
 * Admissions join, give up and see their shared reads and reviews settle in any order. Over random
 * scripts of those events, checked against a model: one start per flight, a flight stopped exactly
 * when everyone waiting on it gave up before it settled, each caller answered once with its
 * flight's outcome or its own reason for giving up, and each caller leaving once.
 */
const Flight = suite("sharedFlight against a model, over random event scripts");

const runs = Number(process.env.PROPERTY_RUNS ?? 300);

type Event = { kind: "join"; key: number; preAborted: boolean } | { kind: "abort"; caller: number } | { kind: "settle"; key: number; ok: boolean };

const event: fc.Arbitrary<Event> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("join" as const), key: fc.integer({ min: 0, max: 2 }), preAborted: fc.nat(9).map((n) => n < 2) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("abort" as const), caller: fc.nat(20) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("settle" as const), key: fc.integer({ min: 0, max: 2 }), ok: fc.boolean() }) },
);

interface ModelFlight {
  readonly id: number;
  readonly stop: AbortSignal;
  readonly settle: { resolve: (v: string) => void; reject: (e: Error) => void };
  waiting: Set<number>;
  outcome?: string;
}

interface Caller {
  readonly controller: AbortController;
  flight: ModelFlight | undefined;
  expected?: string;
  got?: string;
  leaves: number;
}

Flight("every caller gets its flight's outcome or its own reason, once; a flight starts once and stops only when nobody waits", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(event, { maxLength: 40 }), async (script) => {
      const flight = sharedFlight<string>();
      const live = new Map<number, ModelFlight>();
      const flights: ModelFlight[] = [];
      const callers: Caller[] = [];
      let starts = 0;
      for (const e of script) {
        if (e.kind === "join") {
          const controller = new AbortController();
          if (e.preAborted) controller.abort(new Error(`caller ${callers.length} gave up`));
          const current = live.get(e.key);
          let made: ModelFlight | undefined;
          const id = callers.length;
          const caller: Caller = { controller, flight: undefined, leaves: 0 };
          callers.push(caller);
          const answer = flight.join(
            String(e.key),
            controller.signal,
            (stop) => {
              starts += 1;
              return new Promise<string>((resolve, reject) => {
                made = { id: flights.length, stop, settle: { resolve, reject }, waiting: new Set() };
              });
            },
            () => void (caller.leaves += 1),
          );
          const joined = e.preAborted ? undefined : (current ?? made);
          if (e.preAborted) assert.is(made, undefined, "a caller that gave up already started work");
          else if (current) assert.is(made, undefined, "work in flight was started again");
          else assert.ok(made, "no work was started for a key with none in flight");
          if (made) {
            flights.push(made);
            live.set(e.key, made);
          }
          joined?.waiting.add(id);
          caller.flight = joined;
          if (e.preAborted) caller.expected = `rejected: caller ${id} gave up`;
          void answer.then(
            (v) => void (callers[id]!.got = `resolved: ${v}`),
            (error: Error) => void (callers[id]!.got = `rejected: ${error.message}`),
          );
        } else if (e.kind === "abort") {
          const caller = callers[e.caller];
          if (!caller || caller.controller.signal.aborted) continue;
          caller.controller.abort(new Error(`caller ${e.caller} gave up`));
          const f = caller.flight;
          if (f && f.outcome === undefined) {
            caller.expected = `rejected: caller ${e.caller} gave up`;
            f.waiting.delete(e.caller);
            if (f.waiting.size === 0) {
              // Nobody waits: the model forgets it, and the real one must have stopped it.
              for (const [key, held] of live) if (held === f) live.delete(key);
              assert.ok(f.stop.aborted, "a flight nobody waits on was not stopped");
            }
          }
        } else {
          const f = live.get(e.key);
          if (!f) continue;
          assert.is(f.stop.aborted, false, "a flight someone waits on was stopped");
          f.outcome = e.ok ? `resolved: value ${f.id}` : `rejected: failure ${f.id}`;
          if (e.ok) f.settle.resolve(`value ${f.id}`);
          else f.settle.reject(new Error(`failure ${f.id}`));
          for (const id of f.waiting) callers[id]!.expected = f.outcome;
          live.delete(e.key);
          // Let the outcome reach its waiters, as it would before the next event arrived.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
      // Whatever is still in flight settles now.
      for (const f of live.values()) {
        f.outcome = `resolved: value ${f.id}`;
        f.settle.resolve(`value ${f.id}`);
        for (const id of f.waiting) callers[id]!.expected = f.outcome;
      }
      await new Promise((resolve) => setImmediate(resolve));
      assert.is(starts, flights.length);
      callers.forEach((c, id) => {
        assert.is(c.got, c.expected, `caller ${id}`);
        assert.is(c.leaves, 1, `caller ${id} left ${c.leaves} times`);
      });
    }),
    { numRuns: runs },
  );
});

Flight.run();
