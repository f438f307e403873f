import { build } from "esbuild";
import { zipSync } from "fflate";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * `npm run package`: the zip Flex Consumption deploys. Every function module is bundled into one
 * file with its runtime dependencies, so a cold start reads one file instead of thousands; the
 * zip holds that file, host.json and a package.json whose `main` names it. `npm run build` is
 * the same step, so that azd, which zips the project folder through .funcignore, ships the same.
 */
const root = join(__dirname, "..");
// The same layout whether azd zips the folder (.funcignore) or the pipeline deploys the zip.
const bundleDir = join(root, "dist", "functions");
const bundlePath = "dist/functions/main.js";

export async function packageApp(): Promise<{ zipPath: string; bundleBytes: number; zipBytes: number }> {
  rmSync(bundleDir, { recursive: true, force: true });
  mkdirSync(bundleDir, { recursive: true });
  const modules = readdirSync(join(root, "functions"))
    .filter((f) => f.endsWith(".ts"))
    .sort();
  const entry = modules.map((f) => `require("./functions/${f.replace(/\.ts$/, "")}");`).join("\n");
  const result = await build({
    stdin: { contents: entry, resolveDir: root, sourcefile: "functions-entry.js", loader: "js" },
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    outfile: join(root, bundlePath),
    // The worker provides the core API; native speed-ups of `ws` are optional.
    external: ["@azure/functions-core", "bufferutil", "utf-8-validate"],
    minify: true,
    sourcemap: "external",
    legalComments: "external",
    metafile: true,
    logLevel: "warning",
  });
  const source = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; version: string; engines: unknown };
  const manifest = { name: source.name, version: source.version, private: true, main: bundlePath, engines: source.engines, dependencies: {} };
  const files: Record<string, Uint8Array> = {
    [bundlePath]: readFileSync(join(root, bundlePath)),
    [`${bundlePath}.map`]: readFileSync(join(root, `${bundlePath}.map`)),
    "host.json": readFileSync(join(root, "host.json")),
    "package.json": Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`),
  };
  const legal = join(root, `${bundlePath}.LEGAL.txt`);
  try {
    files["THIRD-PARTY-NOTICES.txt"] = readFileSync(legal);
  } catch {
    // no legal comments collected
  }
  const zip = zipSync(files, { level: 9 });
  const zipPath = join(root, "dist", "package.zip");
  writeFileSync(zipPath, zip);
  const bundleBytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  return { zipPath, bundleBytes, zipBytes: zip.byteLength };
}

if (require.main === module) {
  packageApp().then(
    ({ zipPath, bundleBytes, zipBytes }) => process.stdout.write(`${zipPath}: ${(zipBytes / 1024).toFixed(0)} KiB zipped (bundle ${(bundleBytes / 1024).toFixed(0)} KiB)\n`),
    (error: unknown) => {
      process.stderr.write(`package: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
