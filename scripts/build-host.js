// `npm start`, `npm run wire` and `npm run credspec` run this first: the local host and everything it loads, compiled from TypeScript
// to JavaScript file by file (no bundling: the host loads functions/ by listing the folder, as
// the Functions host does with the package's `main` glob), so that the serving process is plain
// Node with no TypeScript loader in it. Plain JavaScript itself, so that building costs one
// short Node process. Files keep their place under dist/local, and what they read next to
// themselves (JSON, scripts, examples, package.json) is copied there too.
//
// @kubernetes/client-node is the exception: loaded whole from node_modules it evaluates every
// generated API and model (about 40 MiB of heap and half a second), of which the product uses a
// handful of classes. The build bundles just those names, tree-shaken by esbuild as the package
// is (no plugin rewrites its modules), into dist/local/node_modules, where Node resolves the
// compiled files' imports first.
//
// A build that is up to date is not done again: the inputs' paths, sizes and modification times
// (sources, examples, the lockfile, this script, the Node release) are hashed into
// dist/local/.inputs once a build has finished, and a start whose hash matches goes straight on.
"use strict";
const { createHash } = require("node:crypto");
const { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } = require("node:fs");
const { join, relative } = require("node:path");

const root = join(__dirname, "..");
const outdir = join(root, "dist", "local");
const sourceDirs = ["host", "functions", "lib", "controlplane", "cluster"];

function filesUnder(dir) {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

const stampFile = join(outdir, ".inputs");

function inputsDigest(files) {
  const inputs = [
    ...files,
    ...filesUnder("examples"),
    "package.json",
    "package-lock.json",
    "scripts/build-host.js",
    "node_modules/@kubernetes/client-node/package.json",
    "node_modules/esbuild/package.json",
  ];
  const hash = createHash("sha256").update(`${process.version}\n`);
  for (const file of inputs) {
    const stat = statSync(join(root, file));
    hash.update(`${file}\0${stat.size}\0${stat.mtimeMs}\n`);
  }
  return hash.digest("hex");
}

function readStamp() {
  try {
    return readFileSync(stampFile, "utf8");
  } catch {
    return undefined;
  }
}

async function main() {
  const started = process.hrtime.bigint();
  const files = sourceDirs.flatMap(filesUnder);
  const digest = inputsDigest(files);
  if (readStamp() === digest) {
    // The command-line tools run this before each call and say nothing when there is nothing to do.
    if (process.argv.includes("--quiet")) return;
    process.stderr.write(`local host in ${relative(root, outdir)} is up to date (checked in ${(Number(process.hrtime.bigint() - started) / 1e6).toFixed(0)} ms)\n`);
    return;
  }
  const { build, buildSync } = require("esbuild");
  rmSync(outdir, { recursive: true, force: true });
  buildSync({
    entryPoints: files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")).map((f) => join(root, f)),
    outbase: root,
    outdir,
    bundle: false,
    platform: "node",
    target: "node22",
    format: "cjs",
    sourcemap: "linked",
    logLevel: "warning",
  });
  for (const file of files.filter((f) => !f.endsWith(".ts"))) {
    mkdirSync(join(outdir, file, ".."), { recursive: true });
    cpSync(join(root, file), join(outdir, file));
  }
  cpSync(join(root, "examples"), join(outdir, "examples"), { recursive: true });

  const clientNode = "@kubernetes/client-node";
  const usedNames = new Set();
  for (const file of files.filter((f) => f.endsWith(".ts"))) {
    for (const match of readFileSync(join(root, file), "utf8").matchAll(/import\s*\{([^}]*)\}\s*from\s*"@kubernetes\/client-node"/g)) {
      for (const part of match[1].split(",")) {
        const name = part.trim().split(/\s+as\s+/)[0];
        if (name && !name.startsWith("type ")) usedNames.add(name);
      }
    }
  }
  const clientDir = join(outdir, "node_modules", clientNode);
  mkdirSync(clientDir, { recursive: true });
  await build({
    stdin: { contents: `export { ${[...usedNames].sort().join(", ")} } from "${clientNode}";`, resolveDir: root, sourcefile: "client-node-entry.js", loader: "js" },
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    outfile: join(clientDir, "index.js"),
    external: ["bufferutil", "utf-8-validate"],
    // Minified as in the deployment package: the process holds the source text in memory.
    minify: true,
    logLevel: "warning",
  });
  const { version } = JSON.parse(readFileSync(join(root, "node_modules", clientNode, "package.json"), "utf8"));
  writeFileSync(join(clientDir, "package.json"), JSON.stringify({ name: clientNode, version, main: "index.js", type: "commonjs" }));
  cpSync(join(root, "package.json"), join(outdir, "package.json"));
  writeFileSync(stampFile, digest);
  process.stderr.write(`local host compiled to ${relative(root, outdir)} in ${(Number(process.hrtime.bigint() - started) / 1e6).toFixed(0)} ms\n`);
}

main().catch((error) => {
  process.stderr.write(`build-host: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
