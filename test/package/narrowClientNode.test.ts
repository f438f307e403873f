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

Narrow("refuses to mark a client-node module free of side effects when it has some", async () => {
  const dist = join(mkdtempSync(join(tmpdir(), "gmsa-narrow-")), "node_modules", "@kubernetes", "client-node", "dist");
  mkdirSync(dist, { recursive: true });
  writeFileSync(join(dist, "index.js"), 'import { register } from "./effect.js";\nexport { register };\n');
  writeFileSync(join(dist, "effect.js"), "export function register() {}\nglobalThis.registered = true;\n");
  try {
    await bundled('import { register } from "./index.js"; register();', narrowClientNode(), dist);
    assert.unreachable("the build passed");
  } catch (error) {
    const texts = ((error as { errors?: Array<{ text: string }> }).errors ?? []).map((e) => e.text);
    assert.ok(texts.some((t) => t.includes("effect.js does more at its top level than define and export (globalThis.registered = true;)")), texts.join("\n") || String(error));
  }
});

Narrow.run();
