// An esbuild plugin for the package build (scripts/package.ts): @kubernetes/client-node as far
// as the product uses it. Two things would otherwise run at every cold start for nothing:
//
// - Its index re-exports every part of client-node (exec, attach, port-forward, cp, logs,
//   metrics…), and each part's imports of CommonJS packages (ws, tar-fs…) run because the
//   bundler must assume they have side effects. Its modules have none but polyfill.js's, so
//   they are declared free of them here, and a part no bundled code uses is left out whole.
// - Its ObjectSerializer holds every one of its ~750 model classes in one map, so a bundle that
//   makes a single API call still loads and runs them all. The plugin gives the serializer a map
//   of the models named in `keep` and those they contain (their attribute types, followed to
//   the end), and the bundler leaves every other model module out.
//
// The serializer treats a type it does not know as plain JSON, so a model left out by mistake
// would not fail: it would be decoded differently. modelNamesIn() rules that out: after a build
// the package build reads the bundle for every model name still written in it (the type names
// client-node's API code passes to the serializer, among them) and, when the map lacks one, adds
// it and builds again, until the bundle names no model the map lacks. What is kept is then what
// the bundled code can ask for by name. A model client-node works out at run time from an
// object's apiVersion and kind (KubernetesObjectApi, loadYaml) is named nowhere in the bundle:
// the package uses neither, and should it come to, its getSerializationType throws for a model
// the map lacks rather than let the object decode as plain JSON.
"use strict";
const { existsSync, readFileSync } = require("node:fs");
const { dirname, join } = require("node:path");

// The client-node release whose modules were read, all of them, for top-level side effects: only
// polyfill.js has one. Marking the modules of another release free of side effects waits for the
// same reading.
const reviewedClientNode = "2.0.1";

/** The version of the client-node that `file` (one of its modules) belongs to. */
function clientNodeRelease(file) {
  return releaseAt(file.slice(0, file.search(/[\\/]dist[\\/]/)));
}
const releaseAt = memo((root) => JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version);

const distDir = /[\\/]@kubernetes[\\/]client-node[\\/]dist([\\/]|$)/;

/** `compute`, called once per key. */
function memo(compute) {
  const known = new Map();
  return (key) => {
    if (!known.has(key)) known.set(key, compute(key));
    return known.get(key);
  };
}

/** The model names in the serializer's map, in the order it lists them. */
function serializerModels(source) {
  const start = source.indexOf("let typeMap = {");
  const end = source.indexOf("};", start);
  if (start < 0 || end < 0) throw new Error("narrow-client-node: client-node's ObjectSerializer has no `let typeMap = {…};`; this client-node release needs scripts/narrowClientNode.js looked at");
  return [...source.slice(start, end).matchAll(/^\s*"(\w+)": (\w+),?$/gm)].map((m) => m[1]);
}

/** `names` and every model their attributes hold, as far as it goes. */
function closure(names, known, dir) {
  const kept = new Set();
  const todo = [...names];
  while (todo.length > 0) {
    const name = todo.pop();
    if (kept.has(name) || !known.has(name)) continue;
    kept.add(name);
    const file = join(dir, `${name}.js`);
    if (!existsSync(file)) continue;
    for (const match of readFileSync(file, "utf8").matchAll(/"type":\s*"([^"]+)"/g)) {
      for (const id of match[1].match(/\w+/g) ?? []) if (known.has(id)) todo.push(id);
    }
  }
  return kept;
}

/**
 * The plugin. `keep`: the model names to keep (the package build grows it); without it the
 * serializer keeps all its models, for a bundle whose code names types at run time (the local
 * host's KubernetesObjectApi does). `report` receives the kept names and the number of models
 * the serializer had.
 */
function narrowClientNode({ keep, report } = {}) {
  return {
    name: "narrow-client-node",
    setup(build) {
      // Each module is read once per build, however many modules import it, and the serializer's
      // map and the run-time guard below keep the same models.
      const effectsOf = memo((path) => topLevelEffects(readFileSync(path, "utf8")));
      const modelsIn = memo((dir) => {
        const names = serializerModels(readFileSync(join(dir, "ObjectSerializer.js"), "utf8"));
        return { names, kept: closure(keep, new Set(names), dir) };
      });
      // Relative imports between client-node's own modules, which define classes and functions
      // and change nothing else, but for the polyfill its index imports for that purpose. A
      // module with any other statement at its top level fails the build (topLevelEffects).
      build.onResolve({ filter: /^\.\.?\/.*\.js$/ }, (args) => {
        if (!distDir.test(args.resolveDir)) return undefined;
        const path = join(args.resolveDir, args.path);
        if (/[\\/]dist[\\/]polyfill\.js$/.test(path)) return undefined;
        const release = clientNodeRelease(path);
        if (release !== reviewedClientNode) return { errors: [{ text: `@kubernetes/client-node ${release} is not the release whose modules were read for side effects (${reviewedClientNode}): read its dist/ modules' top levels (scripts/narrowClientNode.js, topLevelEffects helps), then set reviewedClientNode` }] };
        const effects = effectsOf(path);
        if (effects.length > 0) return { errors: [{ text: `${path} does more at its top level than define and export (${effects.slice(0, 2).join(" | ")}): scripts/narrowClientNode.js must not mark it free of side effects` }] };
        return { path, sideEffects: false };
      });
      if (!keep) return;
      build.onLoad({ filter: /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]gen[\\/]models[\\/]ObjectSerializer\.js$/ }, (args) => {
        const source = readFileSync(args.path, "utf8");
        const dir = dirname(args.path);
        const { names, kept } = modelsIn(dir);
        report?.([...kept].sort(), names.length);
        const start = source.indexOf("let typeMap = {");
        const end = source.indexOf("};", start) + 2;
        const imports = source.slice(0, start).replace(/^import \{ (\w+) \} from '\.\.\/models\/\w+\.js';\n/gm, (line, name) => (kept.has(name) ? line : ""));
        const typeMap = `let typeMap = {\n${[...kept].map((name) => `    "${name}": ${name},`).join("\n")}\n};`;
        return { contents: imports + typeMap + source.slice(end), loader: "js", resolveDir: dir };
      });
      // client-node also works a model's name out at run time from an object's apiVersion and
      // kind (KubernetesObjectApi, loadYaml), a name no bundle writes down. The package uses
      // neither; should it come to, such a name outside the narrowed map fails loudly here
      // instead of decoding the object as plain JSON.
      build.onLoad({ filter: /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]util\.js$/ }, (args) => {
        const source = readFileSync(args.path, "utf8");
        const modelsPath = join(dirname(args.path), "gen", "models");
        const declared = "export function getSerializationType(";
        if (!source.includes(declared)) return { errors: [{ text: `${args.path} no longer declares getSerializationType: scripts/narrowClientNode.js needs looking at` }] };
        const { names, kept } = modelsIn(modelsPath);
        const guarded = [
          source.replace(declared, "function serializationTypeOfClientNode("),
          `const narrowedModels = new Set(${JSON.stringify([...kept].sort())});`,
          `const allModels = new Set(${JSON.stringify([...names].sort())});`,
          "export function getSerializationType(apiVersion, kind) {",
          "    const type = serializationTypeOfClientNode(apiVersion, kind);",
          '    if (allModels.has(type) && !narrowedModels.has(type)) throw new Error(`this bundle\'s client-node serializer was built without the model ${type} (scripts/narrowClientNode.js)`);',
          "    return type;",
          "}",
        ].join("\n");
        return { contents: guarded, loader: "js", resolveDir: dirname(args.path) };
      });
    },
  };
}

/**
 * The statements at the top level of `source` (one of client-node's compiled modules) that may do
 * something when the module is evaluated, beyond declaring, importing and exporting, and setting
 * a static property of a class the module declares. Read line by line, as the TypeScript compiler
 * lays its output out (a top-level statement starts at the first column), and only a help: a side
 * effect inside an initializer gets through, which is why the marking also waits for a person to
 * have read the client-node release it applies to (reviewedClientNode).
 */
function topLevelEffects(source) {
  const classes = new Set([...source.matchAll(/^(?:export\s+(?:default\s+)?)?(?:class\s+(\w+)|(?:let|const|var)\s+(\w+)\s*=\s*class\b)/gm)].map((m) => m[1] ?? m[2]));
  // TypeScript's enums: `var K;` then `(function (K) { … })(K || (K = {}));`, which fills K only.
  const vars = new Set([...source.matchAll(/^(?:export\s+)?var\s+(\w+);/gm)].map((m) => m[1]));
  const effects = [];
  for (const line of source.split("\n")) {
    if (line === "" || line === ";" || /^['"]use strict['"];?$/.test(line) || /^[\s}\])]/.test(line) || /^(\/\/|\/\*|\*)/.test(line)) continue;
    if (/^(import|export|class|function|async function|const|let|var)\b/.test(line) && !/\bglobalThis\b|\bprocess\.(on|env)\b/.test(line)) continue;
    const assignment = /^(\w+)\.\w+ = /.exec(line);
    if (assignment && classes.has(assignment[1]) && !/\bglobalThis\b/.test(line)) continue;
    const enumFill = /^\(function \((\w+)\) \{$/.exec(line);
    if (enumFill && vars.has(enumFill[1])) continue;
    effects.push(line.slice(0, 80));
  }
  return effects;
}

/**
 * The model names `bundle` (the built JavaScript) holds as words anywhere: in the type names
 * client-node's API code passes to the serializer ("V1Status", "Array<V1Condition>"), in the
 * serializer's own map, and wherever else. Words, not string literals: telling a minified
 * bundle's strings apart needs a parser, and a word that only looks like a model name costs one
 * small model kept. `models` are all the names the serializer knows; only those are looked for.
 */
function modelNamesIn(bundle, models) {
  const words = new Set(bundle.match(/\w+/g) ?? []);
  return new Set(models.filter((name) => words.has(name)));
}

/** Every model name client-node's serializer knows, from the installed client-node. */
function allModels(resolveFrom) {
  const path = require.resolve("@kubernetes/client-node/package.json", { paths: [resolveFrom] });
  return serializerModels(readFileSync(join(dirname(path), "dist", "gen", "models", "ObjectSerializer.js"), "utf8"));
}

module.exports = { allModels, modelNamesIn, narrowClientNode };
