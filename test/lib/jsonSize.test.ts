import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { heldBytes, jsonSize } from "../../lib/jsonSize.js";
import { credSpecFixture } from "../support/fixtures.js";

const Size = suite("jsonSize and heldBytes");

Size("jsonSize is close to the length of the JSON, for nested and deep values alike", () => {
  const fixture = credSpecFixture("webapp1-credspec");
  for (const value of [fixture, { a: [1, true, null, "x"], b: { c: "ddd" } }, { ...fixture, credspec: { ...fixture.credspec, padding: "x".repeat(5000) } }]) {
    const written = JSON.stringify(value).length;
    const counted = jsonSize(value);
    assert.ok(counted >= written * 0.8 && counted <= written * 1.5, `${counted} for ${written}`);
  }
  let deep: unknown = "end";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.ok(jsonSize(deep) > 200_000);
});

Size("heldBytes is no less than what V8 holds for a parsed value, however it is shaped", () => {
  // A full collection on demand, without starting the test process with --expose-gc.
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const fixture = credSpecFixture("webapp1-credspec");
  const shapes: Record<string, unknown> = {
    "a credential spec": fixture,
    "empty objects": Array.from({ length: 2000 }, () => ({})),
    "empty arrays": Array.from({ length: 2000 }, () => []),
    "one-key objects": Array.from({ length: 2000 }, (_, i) => ({ [`k${i % 50}`]: i })),
    nested: Array.from({ length: 2000 }).reduce<unknown>((inner) => ({ a: inner }), {}),
    numbers: Array.from({ length: 2000 }, (_, i) => i + 0.5),
    strings: Array.from({ length: 2000 }, (_, i) => `s${i}`),
  };
  for (const [shape, value] of Object.entries(shapes)) {
    const text = JSON.stringify(value);
    const estimate = heldBytes(JSON.parse(text));
    assert.ok(estimate >= text.length, `${shape}: ${estimate} for ${text.length} characters`);
    // 50 copies, so that one value's noise does not count.
    gc();
    const before = process.memoryUsage().heapUsed;
    const copies = Array.from({ length: 50 }, () => JSON.parse(text) as unknown);
    gc();
    const held = (process.memoryUsage().heapUsed - before) / copies.length;
    assert.ok(estimate >= held, `${shape}: estimated ${estimate}, held ${held.toFixed(0)}`);
  }
  // Empty objects: 64 bytes each, not their 3 characters.
  assert.ok(heldBytes(shapes["empty objects"]) > 20 * JSON.stringify(shapes["empty objects"]).length);
  let deep: unknown = "end";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.ok(heldBytes(deep) > 4_000_000);
});

Size.run();
