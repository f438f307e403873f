import { suite } from "uvu";
import * as assert from "uvu/assert";
import { memberClient, type MemberClientOptions, type MemberPorts, type MemberTimers } from "../../../lib/fleet/memberClient.js";
import { serviceAccountPrincipal } from "../../../lib/gmsa/ports.js";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";

/** A clock and timers the test moves by hand. */
function fakeTime() {
  let now = 1_000_000;
  const pending = new Map<number, { at: number; run: () => void }>();
  let next = 1;
  const timers: MemberTimers = {
    set: (run, ms) => {
      const id = next++;
      pending.set(id, { at: now + ms, run });
      return id;
    },
    clear: (handle) => void pending.delete(handle as number),
  };
  return {
    now: () => now,
    timers,
    pending: () => pending.size,
    advance(ms: number) {
      now += ms;
      for (const [id, timer] of [...pending]) {
        if (timer.at <= now) {
          pending.delete(id);
          timer.run();
        }
      }
    },
  };
}

interface FakeClient {
  readonly ports: MemberPorts;
  stopped: boolean;
}

function fakeStarts() {
  const made: FakeClient[] = [];
  let fail: Error | undefined;
  let gate: Promise<void> | undefined;
  const start = async (): Promise<MemberPorts> => {
    await gate;
    if (fail) throw fail;
    const index = made.length;
    const client: FakeClient = {
      stopped: false,
      ports: {
        credSpecs: { lookup: async () => ({ kind: "found", credspec: { made: index } }), knownNames: () => ["a"] },
        authorizer: { mayUse: async () => ({ allowed: true }) },
        cacheStatus: () => ({ started: true, synced: true, stale: false, size: 1, notFound: 0, overflow: false }),
        stop: async () => void (client.stopped = true),
      },
    };
    made.push(client);
    return client.ports;
  };
  return {
    start,
    made,
    failWith: (error: Error | undefined) => void (fail = error),
    hold: () => {
      let open = () => {};
      gate = new Promise<void>((resolve) => (open = resolve));
      return () => {
        gate = undefined;
        open();
      };
    },
  };
}

const never = new AbortController().signal;
const principal = serviceAccountPrincipal("apps", "web");

interface Context {
  time: ReturnType<typeof fakeTime>;
  starts: ReturnType<typeof fakeStarts>;
  logs: string[];
}

const Member = suite<Context>("memberClient");

Member.before.each((context) => {
  context.time = fakeTime();
  context.starts = fakeStarts();
  context.logs = [];
});

function member(context: Context, overrides: Partial<MemberClientOptions> = {}) {
  return memberClient({
    name: "alpha",
    start: context.starts.start,
    idleMs: 60_000,
    now: context.time.now,
    timers: context.time.timers,
    log: (_l, m) => context.logs.push(m),
    ...overrides,
  });
}

Member("nothing starts until a port is used; the first lookup starts the client", async (context) => {
  const client = member(context);
  assert.is(client.status().state, "idle");
  assert.is(context.starts.made.length, 0);
  assert.equal(await client.credSpecs.lookup("a", { signal: never }), { kind: "found", credspec: { made: 0 } });
  assert.is(client.status().state, "started");
  assert.equal(client.credSpecs.knownNames?.(), ["a"]);
});

Member("concurrent first admissions share one start", async (context) => {
  const client = member(context);
  const open = context.starts.hold();
  const calls = [
    client.credSpecs.lookup("a", { signal: never }),
    client.authorizer.mayUse(principal, "apps", "a", { signal: never }),
    client.credSpecs.lookup("b", { signal: never }),
  ];
  assert.is(client.status().state, "starting");
  open();
  await Promise.all(calls);
  assert.is(context.starts.made.length, 1);
  assert.is(client.status().starts, 1);
});

Member("a failed start fails the call as the cluster being unavailable, and is not kept", async (context) => {
  const client = member(context);
  context.starts.failWith(new Error("ARM answered 403"));
  try {
    await client.credSpecs.lookup("a", { signal: never });
    assert.unreachable("the lookup failed");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
    assert.match((error as Error).message, /cluster "alpha" could not start: ARM answered 403/);
    assert.match(String((error as Error).cause), /ARM answered 403/);
  }
  assert.is(client.status().state, "idle");
  context.starts.failWith(undefined);
  assert.is((await client.credSpecs.lookup("a", { signal: never })).kind, "found");
  assert.is(client.status().starts, 2);
});

Member("a start slower than the admission fails that admission closed, and goes on for the next", async (context) => {
  const client = member(context);
  const open = context.starts.hold();
  const budget = new AbortController();
  const first = client.credSpecs.lookup("a", { signal: budget.signal });
  budget.abort();
  try {
    await first;
    assert.unreachable("the first admission gave up");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
    assert.is((error as ClusterUnavailableError).failure, "timeout");
  }
  const second = client.credSpecs.lookup("a", { signal: never });
  open();
  assert.is((await second).kind, "found");
  assert.is(context.starts.made.length, 1);
});

Member("after the idle timeout without admissions the client is stopped, and the next admission starts a new one", async (context) => {
  const client = member(context);
  client.enter();
  await client.credSpecs.lookup("a", { signal: never });
  client.leave();
  context.time.advance(59_999);
  assert.is(client.status().state, "started");
  context.time.advance(1);
  assert.is(client.status().state, "idle");
  assert.ok(context.starts.made[0]!.stopped, "the first client was stopped");
  assert.is(client.status().credSpecCache, undefined, "no cache is reported for a stopped client");
  assert.match(context.logs.join("\n"), /cluster "alpha": no admission for 60 s, its watch is stopped/);
  assert.equal(await client.credSpecs.lookup("a", { signal: never }), { kind: "found", credspec: { made: 1 } });
  assert.is(client.status().starts, 2);
});

Member("each admission puts the idle timeout off", async (context) => {
  const client = member(context);
  await client.credSpecs.lookup("a", { signal: never });
  for (let i = 0; i < 5; i++) {
    context.time.advance(40_000);
    client.enter();
    client.leave();
  }
  assert.is(client.status().state, "started");
  context.time.advance(60_000);
  assert.is(client.status().state, "idle");
});

Member("a client is not stopped while an admission for it runs, however long it takes", async (context) => {
  const client = member(context);
  client.enter();
  await client.credSpecs.lookup("a", { signal: never });
  context.time.advance(200_000);
  assert.is(client.status().state, "started");
  client.leave();
  context.time.advance(60_000);
  assert.is(client.status().state, "idle");
});

Member("without an idle timeout (a single cluster) no timer is ever set", async (context) => {
  const { idleMs: _unset, ...options } = { idleMs: undefined };
  const client = memberClient({ name: "default", start: context.starts.start, now: context.time.now, timers: context.time.timers, log: () => {}, ...options });
  await client.credSpecs.lookup("a", { signal: never });
  assert.is(context.time.pending(), 0);
  context.time.advance(10 * 86_400_000);
  assert.is(client.status().state, "started");
});

Member("the status counts admissions and says when the last one finished", async (context) => {
  const client = member(context);
  assert.is(client.status().lastAdmissionAt, undefined);
  client.enter();
  context.time.advance(5);
  client.leave();
  assert.equal({ admissions: client.status().admissions, at: client.status().lastAdmissionAt }, { admissions: 1, at: context.time.now() });
});

Member("stopped for good while starting, the client that comes up is stopped too", async (context) => {
  const client = member(context);
  const open = context.starts.hold();
  const call = client.credSpecs.lookup("a", { signal: never });
  await client.stop();
  open();
  try {
    await call;
    assert.unreachable("the lookup failed");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
  }
  assert.ok(context.starts.made[0]!.stopped);
  assert.is(client.status().state, "stopped");
});

Member("a start that never settles is given up after its timeout: the next admission starts afresh, and a late finish is stopped", async (context) => {
  const client = member(context, { startTimeoutMs: 30_000 });
  const release = context.starts.hold();
  const first = client.start();
  context.time.advance(29_999);
  assert.is(client.status().state, "starting");
  context.time.advance(1);
  try {
    await first;
    assert.unreachable("the hung start was never given up");
  } catch (error) {
    assert.instance(error, ClusterUnavailableError);
    assert.is((error as ClusterUnavailableError).failure, "timeout");
  }
  assert.is(client.status().state, "idle");
  assert.ok(
    context.logs.some((l) => l.includes("did not start within 30 s")),
    context.logs.join("\n"),
  );
  release();
  assert.equal(await client.credSpecs.lookup("a", { signal: never }), { kind: "found", credspec: { made: 1 } });
  assert.is(client.status().starts, 2);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(
    context.starts.made.map((m) => m.stopped),
    [true, false],
    "the late client was stopped, the new one runs",
  );
});

Member("a start timeout under a second is told in ms, not rounded to 0 s", async (context) => {
  const client = member(context, { startTimeoutMs: 250 });
  context.starts.hold();
  const first = client.start().catch((error: unknown) => error);
  context.time.advance(250);
  const error = await first;
  assert.instance(error, ClusterUnavailableError);
  assert.match((error as Error).message, "within 250 ms");
  assert.ok(
    context.logs.some((l) => l.includes("did not start within 250 ms")),
    context.logs.join("\n"),
  );
});

Member("a start that settles in time leaves no timer behind but the idle one", async (context) => {
  const client = member(context);
  await client.start();
  assert.is(context.time.pending(), 1);
});

Member.run();
