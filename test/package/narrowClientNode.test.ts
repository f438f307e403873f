import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runInNewContext } from "node:vm";
import { build, type Plugin } from "esbuild";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { narrowClientNode } from "../../scripts/narrowClientNode.js";

/** client-node as the package build trims it (scripts/narrowClientNode.js). */
const Narrow = suite("client-node narrowed for the package");

const root = join(__dirname, "..", "..");

/** Bundles `source` with the plugin and answers the bundle's text. */
async function bundled(source: string, plugin: Plugin, resolveDir = root): Promise<string> {
  const result = await build({ stdin: { contents: source, resolveDir, loader: "js" }, bundle: true, platform: "node", format: "cjs", write: false, logLevel: "silent", external: ["bufferutil", "utf-8-validate"], nodePaths: [join(root, "node_modules")], plugins: [plugin] });
  return result.outputFiles[0]!.text;
}

/** Runs a bundle as a CommonJS module and answers its exports. */
function exportsOf(bundle: string): Record<string, unknown> {
  const module = { exports: {} as Record<string, unknown> };
  runInNewContext(bundle, { module, exports: module.exports, require, process, Buffer, URL, TextEncoder, TextDecoder, setTimeout, clearTimeout, globalThis: {}, console });
  return module.exports;
}

Narrow("keeps the named models and every model they hold, down to the leaves, and no other", async () => {
  let kept: readonly string[] = [];
  let total = 0;
  await bundled('export { AuthorizationV1Api } from "@kubernetes/client-node";', narrowClientNode({ keep: new Set(["V1LocalSubjectAccessReview"]), report: (names, all) => ((kept = names), (total = all)) }));
  for (const name of ["V1LocalSubjectAccessReview", "V1SubjectAccessReviewSpec", "V1SubjectAccessReviewStatus", "V1ResourceAttributes", "V1FieldSelectorRequirement", "V1ObjectMeta", "V1ManagedFieldsEntry", "V1OwnerReference"]) {
    assert.ok(kept.includes(name), `${name} missing from ${kept.join(" ")}`);
  }
  for (const name of ["V1Pod", "V1SubjectAccessReview", "V1Status"]) assert.not.ok(kept.includes(name), `${name} kept`);
  assert.ok(total > 500, `${total} models in all`);
});

// A model name worked out at run time (loadYaml, KubernetesObjectApi) is never written in the
// bundle; outside the narrowed map it must fail, not decode as plain JSON.
Narrow("fails loudly where client-node works out a model the map lacks at run time", async () => {
  const pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nstatus:\n  startTime: '2026-01-02T03:04:05Z'\n";
  const source = 'export { loadYaml } from "@kubernetes/client-node";';
  const narrowed = exportsOf(await bundled(source, narrowClientNode({ keep: new Set(["V1LocalSubjectAccessReview"]) }))) as { loadYaml: (text: string) => unknown };
  assert.throws(() => narrowed.loadYaml(pod), /built without the model V1Pod/);
  const whole = exportsOf(await bundled(source, narrowClientNode())) as { loadYaml: (text: string) => { kind: string; status: { startTime: unknown } } };
  const decoded = whole.loadYaml(pod);
  assert.is(decoded.kind, "Pod");
  // A Date of the bundle's own context, decoded by the model: not the string of the YAML.
  assert.is(Object.prototype.toString.call(decoded.status.startTime), "[object Date]");
});

/** A client-node of `version` whose index imports effect.js, which holds `effect`; answers the build's errors. */
async function sideEffectErrors(effect: string, version = "2.0.1"): Promise<string[]> {
  const root = join(mkdtempSync(join(tmpdir(), "gmsa-narrow-")), "node_modules", "@kubernetes", "client-node");
  const dist = join(root, "dist");
  mkdirSync(dist, { recursive: true });
  writeFileSync(join(root, "package.json"), JSON.stringify({ name: "@kubernetes/client-node", version }));
  writeFileSync(join(dist, "index.js"), 'import { register } from "./effect.js";\nexport { register };\n');
  writeFileSync(join(dist, "effect.js"), `export function register() {}\n${effect}\n`);
  try {
    await bundled('import { register } from "./index.js"; register();', narrowClientNode(), dist);
    return [];
  } catch (error) {
    return ((error as { errors?: Array<{ text: string }> }).errors ?? []).map((e) => e.text);
  }
}

Narrow("refuses to mark a client-node module free of side effects when it has some", async () => {
  for (const effect of ["globalThis.registered = true;", "export const done = (globalThis.registered = true);", "setInterval(() => {}, 1000);", "if (typeof File === 'undefined') {\n  globalThis.File = class {};\n}"]) {
    const errors = await sideEffectErrors(effect);
    assert.ok(errors.some((t) => t.includes("effect.js does more at its top level than define and export")), `${effect}\n→ ${errors.join("\n") || "no error"}`);
  }
});

Narrow("marks the shapes client-node's compiler output has: classes, statics, enums", async () => {
  const benign = ['"use strict";', "export class K {}\nK.x = 1;", "export var Kind;\n(function (Kind) {\n    Kind[\"A\"] = \"a\";\n})(Kind || (Kind = {}));", "let L = class L {};\nL.y = 2;\nexport { L };", "export const names = new Set(['a']);", "export class W {\n}\n;"];
  for (const source of benign) assert.equal(await sideEffectErrors(source), [], source);
});

Narrow("marks no module of a client-node release nobody has read", async () => {
  const errors = await sideEffectErrors("export const x = 1;", "2.1.0");
  assert.ok(errors.some((t) => t.includes("@kubernetes/client-node 2.1.0 is not the release whose modules were read for side effects (2.0.1)")), errors.join("\n"));
});

Narrow.run();
