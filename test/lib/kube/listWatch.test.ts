import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { apiServerConnection, type ApiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import { listWatch, ListWatchError, type ListedObject } from "../../../lib/kube/listWatch.js";
import { kubeConfigFor } from "../../support/kubeconfigs.js";

/**
 * The list and watch the credential spec cache is built on, against a server whose every answer
 * the test chooses: stream ends, versions too old to watch from, bookmarks, and objects deleted
 * between two lists.
 */
interface Scripted {
  /** What a list answers: the objects and the version, an error status, or text as it is. */
  list: () => { items: ListedObject[]; resourceVersion: string } | { status: number } | { raw: string };
  /** What each watch does, in order: its events (then it ends, or stays open when `hold`), or an error status. An event given as a string is sent as it is. */
  watches: Array<{ events: unknown[]; hold?: boolean } | { status: number }>;
}

interface Harness {
  readonly connection: ApiServerConnection;
  readonly requests: string[];
  readonly open: Set<ServerResponse>;
  close(): Promise<void>;
}

async function serve(script: Scripted): Promise<Harness> {
  const requests: string[] = [];
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    requests.push(req.url ?? "");
    const url = new URL(req.url ?? "/", "http://x");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (url.searchParams.get("watch") !== "true") {
      const listed = script.list();
      if ("status" in listed) return json(listed.status, { kind: "Status", code: listed.status, message: "refused by the test" });
      if ("raw" in listed) {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(listed.raw);
      }
      return json(200, { kind: "List", metadata: { resourceVersion: listed.resourceVersion }, items: listed.items });
    }
    const next = script.watches.shift() ?? { events: [], hold: true };
    if ("status" in next) return json(next.status, { kind: "Status", code: next.status, message: "too old resource version" });
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
    for (const event of next.events) res.write(`${typeof event === "string" ? event : JSON.stringify(event)}\n`);
    if (next.hold) {
      open.add(res);
      res.on("close", () => open.delete(res));
    } else res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const config = kubeConfigFor({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  const connection = apiServerConnection(config, { timeoutMs: 2000 });
  return {
    connection,
    requests,
    open,
    async close() {
      await connection.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const spec = (name: string, resourceVersion: string): ListedObject => ({ metadata: { name, resourceVersion } });

/** A copy kept the way the cache keeps it, and what was reported. */
function keeper() {
  const held = new Map<string, string | undefined>();
  const errors: unknown[] = [];
  return {
    held,
    errors,
    handlers: {
      replace: (items: readonly ListedObject[]) => {
        held.clear();
        for (const item of items) held.set(item.metadata!.name!, item.metadata?.resourceVersion);
      },
      upsert: (item: ListedObject) => void held.set(item.metadata!.name!, item.metadata?.resourceVersion),
      remove: (item: ListedObject) => void held.delete(item.metadata!.name!),
      error: (error: unknown) => void errors.push(error),
    },
  };
}

async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > ms) assert.unreachable(`${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const watchesOf = (requests: string[]) => requests.filter((r) => r.includes("watch=true")).map((r) => new URL(r, "http://x").searchParams.get("resourceVersion"));
const listsOf = (requests: string[]) => requests.filter((r) => !r.includes("watch=true")).length;

const ListWatch = suite("list and watch");

ListWatch("a watch the server ends is opened again from the last version seen, bookmarks included, without listing again", async () => {
  const harness = await serve({
    list: () => ({ items: [spec("a", "5")], resourceVersion: "10" }),
    watches: [
      {
        events: [
          { type: "ADDED", object: spec("b", "11") },
          { type: "BOOKMARK", object: { metadata: { resourceVersion: "14" } } },
        ],
      },
      {
        events: [
          { type: "MODIFIED", object: spec("a", "15") },
          { type: "DELETED", object: spec("b", "16") },
        ],
        hold: true,
      },
    ],
  });
  const kept = keeper();
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", kept.handlers);
  try {
    await watch.start();
    await until(() => kept.held.get("a") === "15" && !kept.held.has("b"), "the second watch's events");
    assert.equal(watchesOf(harness.requests), ["10", "14"]);
    assert.is(listsOf(harness.requests), 1);
    assert.equal(kept.errors, []);
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("a version too old to watch from (410 Gone as an event or an answer) is listed again, and what vanished meanwhile is dropped", async () => {
  let lists = 0;
  const harness = await serve({
    list: () => (++lists === 1 ? { items: [spec("a", "5"), spec("b", "6")], resourceVersion: "10" } : { items: [spec("a", "20")], resourceVersion: String(20 + 10 * lists) }),
    // Gone as an event; the fresh list's version is taken and the stream runs to its end; gone as an answer; taken.
    watches: [{ events: [{ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired" } }] }, { events: [] }, { status: 410 }, { events: [], hold: true }],
  });
  const kept = keeper();
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", kept.handlers);
  try {
    await watch.start();
    await until(() => harness.open.size === 1, "a watch held open");
    assert.equal([...kept.held], [["a", "20"]]);
    assert.equal(watchesOf(harness.requests), ["10", "40", "40", "50"]);
    assert.is(listsOf(harness.requests), 3);
    assert.equal(kept.errors, []);
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("a server that forgets the version of its own fresh list is reported once, not listed again in a loop", async () => {
  let lists = 0;
  const harness = await serve({
    list: () => ({ items: [], resourceVersion: String(++lists) }),
    watches: [{ events: [{ type: "ERROR", object: { kind: "Status", code: 410 } }] }, { events: [{ type: "ERROR", object: { kind: "Status", code: 410 } }] }, { status: 410 }],
  });
  const kept = keeper();
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", kept.handlers);
  try {
    await watch.start();
    await until(() => kept.errors.length === 1, "the failure reported");
    assert.instance(kept.errors[0], ListWatchError);
    assert.is((kept.errors[0] as ListWatchError).status, 410);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.is(listsOf(harness.requests), 2, "listed again once, then left to its owner's backoff");
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("watches are opened at most once a second, whatever each stream carried", async () => {
  const bookmark = (rv: string) => ({ type: "BOOKMARK", object: { metadata: { resourceVersion: rv } } });
  const harness = await serve({
    list: () => ({ items: [], resourceVersion: "1" }),
    watches: Array.from({ length: 50 }, (_, i) => ({ events: [bookmark(String(i + 2))] })),
  });
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", keeper().handlers);
  try {
    await watch.start();
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const opened = watchesOf(harness.requests).length;
    assert.ok(opened >= 2 && opened <= 4, `${opened} watches in 2.5 s`);
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("a list whose server hands out the same continue token twice fails instead of paging for ever", async () => {
  const requests: string[] = [];
  const harness = await serve({ list: () => ({ items: [], resourceVersion: "1" }), watches: [] });
  // The scripted server pages nothing; this one loops on one token.
  const looping: ApiServerConnection = {
    server: harness.connection.server,
    async send(call) {
      requests.push(call.path);
      return { status: 200, body: { metadata: { resourceVersion: "1", continue: "same" }, items: [] }, warnings: [] };
    },
    stream: (call) => harness.connection.stream(call),
    close: () => harness.connection.close(),
  };
  const watch = listWatch(looping, "/apis/windows.k8s.io/v1/gmsacredentialspecs", keeper().handlers);
  try {
    const failed = await watch.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.instance(failed, ListWatchError);
    assert.match(String(failed), /same continue token twice/);
    assert.is(requests.length, 2);
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("a list refused fails the start with its status; a watch that fails later is reported, not retried by itself", async () => {
  let refuse = true;
  const harness = await serve({
    list: () => (refuse ? { status: 401 } : { items: [], resourceVersion: "1" }),
    watches: [{ events: [{ type: "ERROR", object: { kind: "Status", code: 500, message: "etcd went away" } }] }],
  });
  const kept = keeper();
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", kept.handlers);
  try {
    const refused = await watch.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.instance(refused, ListWatchError);
    assert.is((refused as ListWatchError).status, 401);
    refuse = false;
    await watch.start();
    await until(() => kept.errors.length === 1, "the broken watch reported");
    assert.match(String(kept.errors[0]), /etcd went away/);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.is(watchesOf(harness.requests).length, 1, "a broken watch was opened again without its owner asking");
  } finally {
    watch.stop();
    await harness.close();
  }
});

ListWatch("stop closes the open watch", async () => {
  const harness = await serve({ list: () => ({ items: [], resourceVersion: "1" }), watches: [{ events: [], hold: true }] });
  const kept = keeper();
  const watch = listWatch(harness.connection, "/apis/windows.k8s.io/v1/gmsacredentialspecs", kept.handlers);
  try {
    await watch.start();
    await until(() => harness.open.size === 1, "the watch open");
    watch.stop();
    await until(() => harness.open.size === 0, "the watch closed");
    assert.equal(kept.errors, []);
  } finally {
    await harness.close();
  }
});

ListWatch("with a bound on what it reads, text that parses into much less than it says (a key given twice) is refused, listed or watched", async () => {
  // Each key given 5 000 times: parsed, one property; held, the room of all of them.
  const twice = (name: string, version: string) => `{"metadata":{"name":"${name}","resourceVersion":"${version}"},"x":{${'"a":0,'.repeat(5000)}"a":0}}`;
  const listed = await serve({ list: () => ({ raw: `{"kind":"List","metadata":{"resourceVersion":"1"},"items":[${twice("a", "1")}]}` }), watches: [] });
  try {
    const { handlers } = keeper();
    const refused = await listWatch(listed.connection, "/apis/x/v1/things", handlers, { maxResponseBytes: 1 << 20 })
      .start()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    assert.instance(refused, ListWatchError);
    assert.ok((refused as ListWatchError).tooLarge, String(refused));
    // Without the bound, as any other list of the connection's, it is read.
    const plain = keeper();
    await listWatch(listed.connection, "/apis/x/v1/things", plain.handlers).start();
    assert.equal([...plain.held.keys()], ["a"]);
  } finally {
    await listed.close();
  }
  const watched = await serve({
    list: () => ({ items: [], resourceVersion: "1" }),
    watches: [{ events: [`{"type":"ADDED","object":${twice("b", "2")}}`], hold: true }],
  });
  try {
    const { handlers, errors, held } = keeper();
    const watch = listWatch(watched.connection, "/apis/x/v1/things", handlers, { maxResponseBytes: 1 << 20 });
    await watch.start();
    await until(() => errors.length > 0, "the watch broke");
    assert.instance(errors[0], ListWatchError);
    assert.ok((errors[0] as ListWatchError).tooLarge);
    assert.is(held.size, 0, "nothing kept");
    watch.stop();
  } finally {
    await watched.close();
  }
});

ListWatch.run();
