import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { suite } from "uvu";
import * as assert from "uvu/assert";

/**
 * The layers of docs/architecture.md, as .dependency-cruiser.cjs states them: the tree keeps them,
 * and the rules do catch what they forbid (type-only imports included).
 */
const root = join(__dirname, "..", "..");
const config = join(root, ".dependency-cruiser.cjs");
const depcruise = join(root, "node_modules", ".bin", "depcruise");
const folders = ["lib", "functions", "host", "cluster", "controlplane", "scripts"];

async function cruise(cwd: string, paths: readonly string[]): Promise<{ code: number; output: string }> {
  // The report's colours and line breaks are for people: matched here without them.
  const plain = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, "").replace(/ →\s+/g, " → ");
  try {
    const { stdout } = await promisify(execFile)(depcruise, [...paths, "--config", config, "--output-type", "err"], { cwd, maxBuffer: 1 << 22 });
    return { code: 0, output: plain(stdout) };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === "number" ? failed.code : 1, output: plain(`${failed.stdout ?? ""}${failed.stderr ?? ""}`) };
  }
}

/** A throwaway tree of the given files, each `path: source`. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-layers-"));
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), source);
  }
  return dir;
}

const Layers = suite("layers");

Layers("the product's tree has no import cycle and no import against its layers", async () => {
  const { code, output } = await cruise(root, folders);
  assert.is(code, 0, output);
  assert.match(output, /no dependency violations found \((\d{3,}) modules/);
});

Layers("a type-only import from the policy into the Kubernetes client is caught", async () => {
  const dir = tree({
    "lib/gmsa/policy.ts": 'import type { Client } from "../kube/client.js";\nexport const judge = (c: Client) => c;\n',
    "lib/kube/client.ts": "export interface Client { readonly server: string }\n",
  });
  const { code, output } = await cruise(dir, ["lib"]);
  assert.is.not(code, 0);
  assert.match(output, /policy-is-pure: lib\/gmsa\/policy\.ts → lib\/kube\/client\.ts/);
});

Layers("the policy importing a Kubernetes or HTTP client package is caught", async () => {
  const dir = tree({
    "lib/gmsa/policy.ts": 'import { request } from "undici";\nexport const judge = request;\n',
    "node_modules/undici/package.json": '{ "name": "undici", "version": "1.0.0", "main": "index.js" }\n',
    "node_modules/undici/index.js": "exports.request = () => {};\n",
  });
  const { code, output } = await cruise(dir, ["lib"]);
  assert.is.not(code, 0);
  assert.match(output, /policy-is-pure: lib\/gmsa\/policy\.ts → node_modules\/undici\/index\.js/);
});

Layers("the envelope reaching into the pod policy, an adapter importing the other, and a cycle are caught", async () => {
  const dir = tree({
    "lib/admission/envelope.ts": 'import { podOf } from "../gmsa/pod.js";\nexport const e = podOf;\n',
    "lib/gmsa/pod.ts": "export const podOf = 1;\n",
    "host/server.ts": 'import { handler } from "../functions/handler.js";\nexport const s = handler;\n',
    "functions/handler.ts": "export const handler = 1;\n",
    "lib/kube/a.ts": 'import { b } from "./b.js";\nexport const a = b;\n',
    "lib/kube/b.ts": 'import { a } from "./a.js";\nexport const b = () => a;\n',
  });
  const { code, output } = await cruise(dir, ["lib", "host", "functions"]);
  assert.is.not(code, 0);
  assert.match(output, /envelope-knows-no-objects: lib\/admission\/envelope\.ts → lib\/gmsa\/pod\.ts/);
  assert.match(output, /host-serves-the-core: host\/server\.ts → functions\/handler\.ts/);
  assert.match(output, /no-circular: lib\/kube\/a\.ts/);
});

Layers.run();
