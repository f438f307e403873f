import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { ApiReply, ApiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import { credSpecApi, lookupFromObject } from "../../../lib/kube/credSpecApi.js";
import { heldBytes } from "../../../lib/jsonSize.js";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";
import { heapHeldEach } from "../../support/heldHeap.js";

/** One GET of a credential spec: what the API server's answer is taken for. */
function answering(reply: Partial<ApiReply>): ApiServerConnection {
  return {
    server: "https://cluster.example",
    send: async () => ({ status: 200, body: undefined, warnings: [], ...reply }),
    stream: async () => ({ status: 500, body: undefined, lines: async function* () {} }),
    close: async () => {},
  };
}

const noDeadline = new AbortController().signal;
const Get = suite("credSpecApi");

Get("the spec asked for is found; a 404 is not found", async () => {
  const found = await credSpecApi(answering({ body: { kind: "GMSACredentialSpec", metadata: { name: "web" }, credspec: { a: 1 } } }), { timeoutMs: 1000 }).lookup("web", {
    signal: noDeadline,
  });
  assert.equal(found, { kind: "found", credspec: { a: 1 } });
  const missing = await credSpecApi(answering({ status: 404, body: { kind: "Status", code: 404 } }), { timeoutMs: 1000 }).lookup("web", { signal: noDeadline });
  assert.equal(missing, { kind: "notFound" });
});

Get("a 2xx that is not that spec (a proxy's page, an empty body, another object) is the path failing, not a spec without contents", async () => {
  for (const body of ["<html>sign in</html>", undefined, { kind: "GMSACredentialSpec", metadata: { name: "other" }, credspec: {} }, [1, 2]]) {
    const outcome = await credSpecApi(answering({ body }), { timeoutMs: 1000 })
      .lookup("web", { signal: noDeadline })
      .then(
        (lookup) => lookup.kind,
        (error: unknown) => error,
      );
    assert.instance(outcome, ClusterUnavailableError, JSON.stringify(body));
  }
});

Get("a spec read from text that parses into much less than it says (a key given twice) is too large to use", async () => {
  const body = { kind: "GMSACredentialSpec", metadata: { name: "web" }, credspec: { a: 1 } };
  const written = JSON.stringify(body).length;
  const lookup = (bytes: number) => credSpecApi(answering({ body, bytes }), { timeoutMs: 1000 }).lookup("web", { signal: noDeadline });
  assert.equal(await lookup(written + 1), { kind: "found", credspec: { a: 1 } }, "a newline after it, as the API server writes");
  assert.equal(await lookup(written + 100_000), { kind: "tooLarge" });
});

/**
 * What a lookup keeps of each of 200 spec objects whose contents `credspec(i)` writes, read from
 * text as a GET reads it, measured after one round of others so that compiling is not counted.
 */
function keptFromText(credspec: (i: number) => string) {
  // Flat, as a body read from the network is: JSON.parse would flatten a built one while measured.
  const texts = (from: number) =>
    Array.from({ length: 200 }, (_, i) => Buffer.from(`{"kind":"GMSACredentialSpec","metadata":{"name":"web"},"credspec":${credspec(from + i)}}`).toString());
  const keep = (text: string) => {
    const lookup = lookupFromObject(JSON.parse(text));
    return lookup.kind === "found" ? lookup.credspec : undefined;
  };
  texts(0).map(keep);
  return heapHeldEach(texts(1000), keep);
}

Get("what a lookup keeps takes what heldBytes counts, even parsed from text that gives a key hundreds of times", () => {
  // An object JSON.parse makes from such text keeps the room of every copy of the key; a lookup
  // keeps a copy of the contents. (Measured on lookupFromObject alone: a GET's call, its timers
  // and signals, are not what is kept.)
  const { held, kept } = keptFromText((i) => `{"u${i}":0,${'"a":0,'.repeat(683)}"a":0}`);
  const counted = heldBytes(kept[0]);
  assert.ok(held <= counted, `held ${held.toFixed(0)} bytes each, counted ${counted}`);
});

Get("a spec nested past what admission reads is too large, not a failure; one whose keys read as array indexes is kept as JSON.parse lays it out", () => {
  const deep = JSON.parse(`{"kind":"GMSACredentialSpec","metadata":{"name":"web"},"credspec":{"x":${"[".repeat(5000)}${"]".repeat(5000)}}}`) as unknown;
  assert.equal(lookupFromObject(deep), { kind: "tooLarge" });
  // A copy made another way (structuredClone) stores {"1023":0} in 1 024 element slots.
  const { held, kept } = keptFromText((i) => `{"m${i}":{"1023":0,"2500":0}}`);
  assert.ok(held <= heldBytes(kept[0]), `held ${held.toFixed(0)} bytes each, counted ${heldBytes(kept[0])}`);
  assert.equal(kept[0], { m1000: { "1023": 0, "2500": 0 } });
});

Get.run();
