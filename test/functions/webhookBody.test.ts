import { HttpRequest, InvocationContext, type HttpRequestInit } from "@azure/functions";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { webhooks } from "../../lib/app/webhooks.js";
import { maxBodyBytes } from "../../lib/admission/httpExchange.js";
import { readAdmissionSettings } from "../../lib/settings/admission.js";
import { readBodyUpTo } from "../../functions/requestBody.js";
import { createAdmissionRuntime, stopAdmissionRuntime, useAdmissionRuntime } from "../../lib/app/runtime.js";
import { serveWebhook } from "../../functions/webhook.js";

const chunkBytes = 64 * 1024;

/** A chunked body of `total` bytes, produced only as it is read; `pulled` counts what was read. */
function trickle(total: number): { stream: ReadableStream<Uint8Array>; pulled: () => number; cancelled: () => boolean } {
  let pulled = 0;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (pulled >= total) return controller.close();
        const size = Math.min(chunkBytes, total - pulled);
        pulled += size;
        controller.enqueue(new Uint8Array(size).fill(0x20));
      },
      cancel() {
        cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, pulled: () => pulled, cancelled: () => cancelled };
}

/**
 * A Functions request whose body streams, as on the Functions host: `body` and `arrayBuffer()`
 * come from one fetch Request, as the library's own HttpRequest delegates them.
 */
class StreamedRequest extends HttpRequest {
  constructor(init: HttpRequestInit & { url: string }, stream: ReadableStream<Uint8Array>) {
    super(init);
    const native = new Request(init.url, { method: "POST", headers: init.headers, body: stream, duplex: "half" });
    // The library declares both as plain members, read from its own fetch Request: these
    // instance members stand in for them.
    Object.defineProperties(this, { body: { get: () => native.body }, arrayBuffer: { value: () => native.arrayBuffer() } });
  }
}

const Body = suite("readBodyUpTo");

Body("a body within the limit comes back whole", async () => {
  const { stream } = trickle(3 * chunkBytes + 5);
  const bytes = await readBodyUpTo(stream, maxBodyBytes);
  assert.is(bytes.byteLength, 3 * chunkBytes + 5);
});

Body("a body of exactly the limit is not too large", async () => {
  const { stream } = trickle(10 * chunkBytes);
  assert.is((await readBodyUpTo(stream, 10 * chunkBytes)).byteLength, 10 * chunkBytes);
});

Body("a longer body is read to one byte past the limit, then cancelled", async () => {
  const body = trickle(64 * 1024 * 1024);
  const bytes = await readBodyUpTo(body.stream, 10 * chunkBytes);
  assert.is(bytes.byteLength, 10 * chunkBytes + 1);
  assert.ok(body.pulled() <= 11 * chunkBytes, `${body.pulled()} bytes read`);
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(body.cancelled(), "the source is told to stop");
});

Body("no body is an empty one", async () => assert.is((await readBodyUpTo(null, 10)).byteLength, 0));

Body("a body that yields something other than bytes is refused, and its source told to stop", async () => {
  let cancelled = false;
  const odd = new ReadableStream<unknown>({ start: (controller) => controller.enqueue("text"), cancel: () => void (cancelled = true) });
  try {
    await readBodyUpTo(odd, 10);
    assert.unreachable("read a string chunk");
  } catch (error) {
    assert.match(String(error), /other than bytes/);
  }
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(cancelled, "the source is told to stop");
});

Body("a body that fails while read is refused with its error", async () => {
  const failing = new ReadableStream<Uint8Array>({
    start: (controller) => {
      controller.enqueue(new Uint8Array(4));
      controller.error(new Error("connection reset"));
    },
  });
  try {
    await readBodyUpTo(failing, 10);
    assert.unreachable("read a failed body");
  } catch (error) {
    assert.match(String(error), /connection reset/);
  }
});

Body.run();

const Webhook = suite("serveWebhook, a chunked body past the limit");

Webhook.before(async () => {
  const refuse = (): never => {
    throw new Error("the cluster is not asked about a body that is too large");
  };
  const settings = readAdmissionSettings({ KUBECONFIG: "/nonexistent", GMSA_CREDSPEC_CACHE: "false" });
  useAdmissionRuntime(
    await createAdmissionRuntime(settings, {
      credSpecs: { lookup: refuse },
      authorizer: { mayUse: refuse },
      server: "https://127.0.0.1:1",
      probe: refuse,
      cacheStatus: () => undefined,
      stop: async () => {},
    }),
  );
});

Webhook.after(() => stopAdmissionRuntime());

Webhook("answers 413 after reading just past the limit, not the whole body", async () => {
  const body = trickle(32 * 1024 * 1024);
  const request = new StreamedRequest({ method: "POST", url: "https://localhost/mutate", headers: { "content-type": "application/json" } }, body.stream);
  const context = new InvocationContext({ invocationId: "body-limit", functionName: "mutate", logHandler: () => {} });
  const response = await serveWebhook(webhooks.mutate, request, context);
  assert.is(response.status, 413);
  assert.ok(body.pulled() <= maxBodyBytes + 2 * chunkBytes, `read ${body.pulled()} bytes of a ${32 * 1024 * 1024}-byte body to refuse it`);
});

Webhook.run();
