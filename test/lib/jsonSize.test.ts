import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { heldBytes, jsonSize } from "../../lib/jsonSize.js";
import { credSpecFixture } from "../support/fixtures.js";

const Size = suite("jsonSize and heldBytes");

Size("jsonSize is the length of the compact JSON in UTF-8 bytes, with the API server's escapes, for nested and deep values alike", () => {
  const fixture = credSpecFixture("webapp1-credspec");
  const samples: unknown[] = [
    fixture,
    { a: [1, true, null, "x", -2.5, false], b: { c: "ddd", "": [] } },
    { ...fixture, credspec: { ...fixture.credspec, padding: "x".repeat(5000), 'quote"and\\': "tab\tline\n" } },
    { euro: "€".repeat(100), emoji: "😀 and ü", [`key-€`]: {} },
  ];
  for (const value of samples) assert.is(jsonSize(value), Buffer.byteLength(JSON.stringify(value)), JSON.stringify(value).slice(0, 80));
  // Go writes these as \u003c, \u003e, \u0026, \u2028 and \u2029, and other control characters as \u00XX.
  assert.is(jsonSize("<&>"), 2 + 3 * 6);
  assert.is(jsonSize("\u2028\u2029\u0001"), 2 + 3 * 6);
  let deep: unknown = "end";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.is(jsonSize(deep), 200_005);
});

Size("heldBytes is no less than what V8 holds for a parsed value, however it is shaped", () => {
  // A full collection on demand, without starting the test process with --expose-gc.
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const fixture = credSpecFixture("webapp1-credspec");
  // Each shape made afresh for every copy: keys that differ from copy to copy are not shared.
  let copy = 0;
  const unique = () => `${copy}-${Math.random().toString(36).slice(2)}`;
  const shapes: Record<string, () => unknown> = {
    "a credential spec": () => fixture,
    "empty objects": () => Array.from({ length: 2000 }, () => ({})),
    "empty arrays": () => Array.from({ length: 2000 }, () => []),
    "one-key objects": () => Array.from({ length: 2000 }, (_, i) => ({ [`k${i % 50}`]: i })),
    nested: () => Array.from({ length: 2000 }).reduce<unknown>((inner) => ({ a: inner }), {}),
    numbers: () => Array.from({ length: 2000 }, (_, i) => i + 0.5),
    strings: () => Array.from({ length: 2000 }, (_, i) => `s${i}`),
    "strings of nine characters of their own": () => Array.from({ length: 2000 }, (_, i) => `${unique()}${i}`.padEnd(9, "q").slice(-9)),
    "arrays of one null": () => Array.from({ length: 2000 }, () => [null]),
    "keys that read as array indexes": () => Array.from({ length: 200 }, (_, i) => ({ "1023": 0, [String(2500 + i)]: 0 })),
    "one small array index each": () => Array.from({ length: 1000 }, (_, i) => ({ [String([24, 31, 34][i % 3])]: null })),
    "index keys 26 apart up to 9 000": () => ({ [`k${unique()}`]: Object.fromEntries(Array.from({ length: 347 }, (_, i) => [String(26 * i), null])) }),
    "two-byte strings": () => Array.from({ length: 200 }, (_, i) => `€${i}`.repeat(50)),
    "one long key of its own": () => ({ Extra: { [`${unique()}${"k".repeat(20_000)}`]: 1 } }),
    "127 short keys of its own, null values": () => Object.fromEntries(Array.from({ length: 127 }, (_, i) => [`${unique()}${i}`, null])),
    "a few hundred short keys of its own": () => Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`${unique()}${i}`, 1])),
    "127 short keys of its own, under one key shared by all": () => ({ shared: Object.fromEntries(Array.from({ length: 127 }, (_, i) => [`${unique()}${i}`, 1])) }),
    "thousands of short keys of its own": () => Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`${unique()}${i}`, 1])),
  };
  for (const [shape, make] of Object.entries(shapes)) {
    const texts = Array.from({ length: 30 }, () => {
      copy += 1;
      return JSON.stringify(make());
    });
    const estimate = heldBytes(JSON.parse(texts[0]!));
    assert.ok(estimate >= texts[0]!.length * 0.9, `${shape}: ${estimate} for ${texts[0]!.length} characters`);
    gc();
    const before = process.memoryUsage().heapUsed;
    const parsed = texts.map((text) => JSON.parse(text) as unknown);
    gc();
    const held = (process.memoryUsage().heapUsed - before) / parsed.length;
    assert.ok(estimate >= held, `${shape}: estimated ${estimate}, held ${held.toFixed(0)}`);
  }
  // Empty objects: 64 bytes each, not their 3 characters.
  const empties = shapes["empty objects"]!();
  assert.ok(heldBytes(empties) > 20 * JSON.stringify(empties).length);
  let deep: unknown = "end";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.ok(heldBytes(deep) > 4_000_000);
});

Size.run();
