import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson, jsonEqual } from "../../../lib/gmsa/canonicalJson.js";
import { credSpecFixtures } from "../../support/fixtures.js";

const Canonical = suite("canonicalJson");

Canonical("writes compact JSON with object keys sorted at every depth", () => {
  assert.is(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } }), '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}');
});

Canonical("escapes <, > and & as \\u003c, \\u003e and \\u0026 like a Go encoder", () => {
  assert.is(canonicalJson({ PluginInput: "a<b>&c" }), '{"PluginInput":"a\\u003cb\\u003e\\u0026c"}');
});

Canonical("escapes the line and paragraph separators", () => {
  assert.is(canonicalJson("x\u2028y\u2029z"), '"x\\u2028y\\u2029z"');
});

Canonical("replaces an unpaired surrogate with U+FFFD", () => {
  assert.is(canonicalJson("a\ud800b"), '"a\ufffdb"');
});

Canonical("encodes a value nested 100 000 levels deep without overflowing the stack", () => {
  const deep = JSON.parse(`${'{"a":['.repeat(100_000)}1${"]}".repeat(100_000)}`);
  assert.is(canonicalJson(deep), `${'{"a":['.repeat(100_000)}1${"]}".repeat(100_000)}`);
  assert.ok(jsonEqual(deep, JSON.parse(canonicalJson(deep))));
  assert.not.ok(jsonEqual(deep, JSON.parse(`${'{"a":['.repeat(100_000)}2${"]}".repeat(100_000)}`)));
});

Canonical("sorts keys by their UTF-8 bytes", () => {
  // U+FF21 is a single UTF-16 unit above the surrogate range but sorts below an astral character in UTF-8.
  assert.is(canonicalJson({ "\u{1F600}": 1, "\uFF21": 2, Z: 3, a: 4 }), '{"Z":3,"a":4,"\uFF21":2,"\u{1F600}":1}');
});

Canonical("refuses values JSON cannot carry", () => {
  assert.throws(() => canonicalJson({ n: Number.NaN }), /NaN/);
});

const goMatches = [
  { PluginInput: "ObjectId=1;SecretUri=https://kv/secrets/a?b=<c>&d" },
  { numbers: [0, -1, 1.5, 1e21, 1e-7, 123456789012, 0.1, 1e20, 5e-324] },
  { unicode: 'héllo \u2028 \u0000 \u001f \b \f \n \r \t " \\ / ☃ \u{1F600}', ключ: true, "": false },
  { nested: { deeper: { deepest: [[], {}, [null]] } } },
  ...credSpecFixtures().flatMap((c) => (c.credspec ? [c.credspec] : [])),
];

const goCheck = spawnSync("go", ["version"], { encoding: "utf8" });
if (goCheck.status === 0) {
  Canonical("produces the same bytes as Go's encoding/json for the same documents", () => {
    const output = execFileSync("go", ["run", "."], {
      cwd: join(__dirname, "..", "..", "support", "gojson"),
      input: JSON.stringify(goMatches),
      encoding: "utf8",
      env: { ...process.env, GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
    });
    const lines = output.trimEnd().split("\n");
    assert.is(lines.length, goMatches.length);
    goMatches.forEach((doc, i) => assert.is(canonicalJson(doc), lines[i], `document ${i}`));
  });
} else {
  Canonical.skip("produces the same bytes as Go's encoding/json (skipped: no Go toolchain on PATH)", () => {});
}

Canonical.run();

const Equal = suite("jsonEqual");

const equalCases: Array<[string, unknown, unknown, boolean]> = [
  ["key order does not matter", { a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }, true],
  ["array order matters", { a: [1, 2] }, { a: [2, 1] }, false],
  ["an extra key differs", { a: 1 }, { a: 1, b: 2 }, false],
  ["null differs from a missing key", { a: null }, { b: null }, false],
  ["an array differs from an object", [], {}, false],
  ["numbers compare by value", { a: 1.0 }, { a: 1 }, true],
  ["strings compare exactly", { a: "CONTOSO" }, { a: "contoso" }, false],
];
for (const [name, a, b, expected] of equalCases) {
  Equal(name, () => assert.is(jsonEqual(a, b), expected));
}

Equal.run();
