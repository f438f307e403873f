// `npm start` runs this first: the local host and everything it loads, compiled from TypeScript
// to JavaScript file by file (no bundling: the host loads functions/ by listing the folder, as
// the Functions host does with the package's `main` glob), so that the serving process is plain
// Node with no TypeScript loader in it. Plain JavaScript itself, so that building costs one
// short Node process. Files keep their place under dist/local, and what they read next to
// themselves (JSON, scripts, examples, package.json) is copied there too.
"use strict";
const { buildSync } = require("esbuild");
const { cpSync, mkdirSync, readdirSync, rmSync } = require("node:fs");
const { join, relative } = require("node:path");

const root = join(__dirname, "..");
const outdir = join(root, "dist", "local");
const sourceDirs = ["host", "functions", "lib", "controlplane", "cluster"];

function filesUnder(dir) {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

const started = process.hrtime.bigint();
rmSync(outdir, { recursive: true, force: true });
const files = sourceDirs.flatMap(filesUnder);
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
cpSync(join(root, "package.json"), join(outdir, "package.json"));
process.stderr.write(`local host compiled to ${relative(root, outdir)} in ${(Number(process.hrtime.bigint() - started) / 1e6).toFixed(0)} ms\n`);
