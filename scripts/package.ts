import { build, type BuildOptions } from "esbuild";
import { zipSync } from "fflate";
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { startTrainingCluster } from "./codeCacheTraining.js";

/**
 * `npm run package`: the zip Flex Consumption deploys. Every function module is bundled into one
 * file with its runtime dependencies, so a cold start reads one file instead of thousands; the
 * zip holds that file, host.json and a package.json whose `main` names a small entry point
 * (scripts/packageEntry.js) that runs the bundle with a V8 code cache made here, after loading
 * the bundle and answering one admission against a stand-in API server (scripts/codeCacheTraining.ts),
 * so that a new instance does not parse and compile 2 MB of JavaScript before and during its first
 * admission. The same files are also written unpacked to dist/package/, the folder azd zips
 * (azure.yaml `dist`, remote build off): `npm run build` is the same step, so azd deploys exactly
 * what the workflow deploys, with a manifest that has no scripts and no dependencies for a
 * build service to run.
 */
const root = join(__dirname, "..");
/** What azd zips and deploys as it is. */
export const packageDir = join(root, "dist", "package");
const bundleDir = join(root, "dist", "functions");
const bundlePath = "dist/functions/main.js";
const appPath = "dist/functions/app.js";
const codeCachePath = `${appPath}.v8cache`;

export async function packageApp(): Promise<{ zipPath: string; bundleBytes: number; zipBytes: number }> {
  rmSync(bundleDir, { recursive: true, force: true });
  mkdirSync(bundleDir, { recursive: true });
  const result = await bundle();
  const app = readFileSync(join(root, appPath));
  assertAscii(app);
  copyFileSync(join(root, "scripts", "packageEntry.js"), join(root, bundlePath));
  await trainCodeCache(join(root, bundlePath));
  const source = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; version: string; engines: unknown };
  const manifest = { name: source.name, version: source.version, private: true, main: bundlePath, engines: source.engines, dependencies: {} };
  const files: Record<string, Uint8Array> = {
    [bundlePath]: readFileSync(join(root, bundlePath)),
    [appPath]: app,
    [`${appPath}.map`]: readFileSync(join(root, `${appPath}.map`)),
    [codeCachePath]: readFileSync(join(root, codeCachePath)),
    "host.json": readFileSync(join(root, "host.json")),
    "package.json": Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`),
  };
  const legal = join(root, `${appPath}.LEGAL.txt`);
  try {
    files["THIRD-PARTY-NOTICES.txt"] = readFileSync(legal);
  } catch {
    // no legal comments collected
  }
  rmSync(packageDir, { recursive: true, force: true });
  for (const [name, bytes] of Object.entries(files)) {
    mkdirSync(dirname(join(packageDir, name)), { recursive: true });
    writeFileSync(join(packageDir, name), bytes);
  }
  const zip = zipSync(files, { level: 9 });
  const zipPath = join(root, "dist", "package.zip");
  writeFileSync(zipPath, zip);
  const bundleBytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
  return { zipPath, bundleBytes, zipBytes: zip.byteLength };
}

/**
 * Writes the V8 code cache beside a package's app.js, run through its entry point (`main`, a copy
 * of scripts/packageEntry.js). A Node of its own and no flags of the parent's (tsx's loader,
 * --cpu-prof): V8 takes a cache only in a process whose flags match the one that made it. It
 * answers one admission first, against a stand-in API server here, so that the cache also holds
 * what a new instance's first admission compiles. The training takes production's path, Microsoft
 * Entra access with a managed identity; a kubeconfig member's loading, and the ARM lookup, compile
 * on first use.
 */
export async function trainCodeCache(main: string): Promise<void> {
  const training = await startTrainingCluster(join(root, "examples", "credspecs", "webapp1.yaml"));
  try {
    // Not execFileSync: the stand-in answers from this process's event loop.
    const { stderr } = await promisify(execFile)(process.execPath, [join(root, "scripts", "packageCodeCache.js"), main, training.mutateReviewFile], {
      env: { PATH: process.env.PATH, ...training.settings },
      timeout: 120_000,
    }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`the code cache could not be made: ${[error.message, error.stderr, error.stdout].filter(Boolean).join("\n")}`);
    });
    if (stderr) process.stderr.write(stderr);
  } finally {
    await training.close();
  }
}

/** What app.js is wrapped in: a function of a module's own variables, called by the entry point. */
export const bundleWrapper = { head: "(function (exports, require, module, __filename, __dirname) {", tail: "})" } as const;

/**
 * How a package's app.js is built, whatever it bundles: for Node 22 as one CommonJS file,
 * minified, in the module wrapper, its licence comments in a file of their own.
 */
export const appBuildOptions = {
  bundle: true,
  platform: "node",
  target: "node22",
  format: "cjs",
  // A package's ESM build where it publishes one beside its CommonJS build without an exports
  // map (fp-ts and io-ts): esbuild joins ES modules into the bundle's scope, where each import of
  // a CommonJS module gets a namespace copy of its exports, a getter per name, at every start.
  mainFields: ["module", "main"],
  minify: true,
  // The function Node wraps a CommonJS module in, written into the file: the entry point runs
  // the file's text as it is read (scripts/packageEntry.js), and the map counts these lines.
  banner: { js: bundleWrapper.head },
  footer: { js: bundleWrapper.tail },
  legalComments: "external",
  logLevel: "warning",
} as const satisfies BuildOptions;

/**
 * One esbuild run of the package bundle: every function module and what it imports, dependencies
 * as they are published (no plugin rewrites a dependency's modules).
 */
export function bundle(options: { write?: boolean } = {}) {
  const modules = readdirSync(join(root, "functions"))
    .filter((f) => f.endsWith(".ts"))
    .sort();
  const entry = modules.map((f) => `import "./functions/${f.replace(/\.ts$/, "")}";`).join("\n");
  return build({
    ...appBuildOptions,
    stdin: { contents: entry, resolveDir: root, sourcefile: "functions-entry.js", loader: "js" },
    outfile: join(root, appPath),
    // The worker provides the core API; native speed-ups of `ws` are optional; `open` starts a
    // browser for @azure/identity's interactive sign-in, which no instance does: it is imported
    // only when that sign-in runs, and would fail there (the package has no node_modules).
    external: ["@azure/functions-core", "bufferutil", "utf-8-validate", "open"],
    sourcemap: "external",
    metafile: true,
    write: options.write ?? true,
  });
}

/**
 * The entry point reads the bundle as Latin-1, which is its text exactly only while every byte is
 * ASCII. esbuild escapes what is not in strings and templates but leaves regular expression
 * literals as written; one character past Latin-1 in one of them made V8 hold the whole 2 MB
 * bundle as a two-byte string, read more slowly at every cold start.
 */
export function assertAscii(bundle: Buffer): void {
  const at = bundle.findIndex((byte) => byte > 0x7f);
  if (at < 0) return;
  const context = bundle.subarray(Math.max(0, at - 60), at + 20).toString("utf8");
  throw new Error(
    `the bundle has a character that is not ASCII at byte ${at}, in …${context}…: write it as an escape (\\uXXXX) in our sources, or keep the module that has it out of the bundle`,
  );
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
