// An esbuild plugin for the package build (scripts/package.ts). @kubernetes/client-node imports,
// at the top of its kubeconfig code, what only some kubeconfigs need: SOCKS and HTTP proxy
// agents (socks, which brings ip-address and smart-buffer; socks-proxy-agent; hpagent),
// JSONPath for the legacy Azure and GCP auth providers, and child_process for exec credential
// plugins. Every cold start loaded and ran all of them. The plugin hands client-node, for each
// of these imports, a stand-in module that requires the real one the first time one of its
// names is called or constructed, so a kubeconfig that names a proxy or an exec plugin still
// gets them, and one that names none never loads them.
//
// A stand-in forwards calls and `new`, nothing else: no `instanceof`, no other property. The
// table below says what each name is, and the build fails when client-node uses a name or a
// property the table does not list, so that a client-node upgrade cannot get a stand-in that
// forwards too little.
"use strict";
const { readFileSync } = require("node:fs");
const { dirname } = require("node:path");

// For each module: how client-node imports it ("named": `import { A } from`, "namespace":
// `import * as m from` or a default import used as `m.name`), and each name's kind: a class
// constructed with `new`, a function called, or an object whose listed methods are called.
const deferred = {
  "socks-proxy-agent": { import: "named", names: { SocksProxyAgent: "class" } },
  socks: { import: "named", names: { SocksClient: ["createConnection"] } },
  hpagent: { import: "named", names: { HttpProxyAgent: "class", HttpsProxyAgent: "class" } },
  "jsonpath-plus": { import: "namespace", names: { JSONPath: "function" } },
  "node:child_process": { import: "namespace", names: { execSync: "function", spawn: "function", spawnSync: "function" } },
};

const clientNodeDist = /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]/;

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** What `source` takes from `specifier`, or a problem with it. */
function usedNames(source, specifier, how) {
  const from = `from\\s*['"]${escape(specifier)}['"]`;
  if (how === "named") {
    const names = [];
    for (const match of source.matchAll(new RegExp(`import\\s*\\{([^}]*)\\}\\s*${from}`, "g"))) {
      for (const part of match[1].split(",")) {
        const name = part.trim().split(/\s+as\s+/)[0];
        if (name) names.push({ name, local: part.trim().split(/\s+as\s+/).pop() });
      }
    }
    return names;
  }
  // A namespace or default binding: the names are the properties read from it.
  const binding = new RegExp(`import\\s*(?:\\*\\s*as\\s+)?(\\w+)\\s*${from}`).exec(source)?.[1];
  if (!binding) return undefined;
  return [...new Set([...source.matchAll(new RegExp(`\\b${binding}\\.(\\w+)`, "g"))].map((m) => m[1]))].map((name) => ({ name, local: name }));
}

/** Every use of `local` in `source` other than its import: `new local(`, `local(`, `local.method(`. */
function usesOf(source, local) {
  return [...source.matchAll(new RegExp(`(new\\s+)?\\b${escape(local)}\\b(\\.(\\w+))?(\\s*\\()?`, "g"))].filter((m) => !/import\s*[{*]/.test(source.slice(Math.max(0, m.index - 200), m.index).split(";").pop() ?? ""));
}

function problems(source, specifier) {
  const entry = deferred[specifier];
  const names = usedNames(source, specifier, entry.import);
  if (!names) return [`imports ${specifier} in a way the stand-in does not handle`];
  const found = [];
  for (const { name, local } of names) {
    const kind = entry.names[name];
    if (!kind) {
      found.push(`uses ${name} of ${specifier}, which has no stand-in`);
      continue;
    }
    if (entry.import !== "named") continue;
    for (const use of usesOf(source, local)) {
      const [, isNew, , method, call] = use;
      if (kind === "class" && !isNew && !method) found.push(`uses ${local} other than with new`);
      if (Array.isArray(kind) && method && !kind.includes(method)) found.push(`calls ${local}.${method}, which the stand-in does not forward`);
      if (Array.isArray(kind) && !method && !/\{[^}]*$/.test(source.slice(Math.max(0, use.index - 100), use.index))) found.push(`uses ${local} itself, not one of its methods`);
      if (kind === "function" && !call) found.push(`uses ${local} other than by calling it`);
    }
  }
  return found;
}

function standIn(specifier, path) {
  const entry = deferred[specifier];
  const lines = ['"use strict";', "let real;", `const load = () => (real ??= require(${JSON.stringify(path)}));`];
  const members = Object.entries(entry.names).map(([name, kind]) => {
    if (kind === "class") return [name, `function ${name}(...args) { return new (load().${name})(...args); }`];
    if (kind === "function") return [name, `function ${name}(...args) { return load().${name}(...args); }`];
    return [name, `{ ${kind.map((method) => `${method}: (...args) => load().${name}.${method}(...args)`).join(", ")} }`];
  });
  for (const [name, value] of members) lines.push(value.startsWith("function") ? `export ${value}` : `export const ${name} = ${value};`);
  if (entry.import === "namespace") lines.push(`export default { ${members.map(([name]) => name).join(", ")} };`);
  return lines.join("\n");
}

function deferClientNodeExtras() {
  return {
    name: "defer-client-node-extras",
    setup(build) {
      const specifiers = Object.keys(deferred);
      build.onResolve({ filter: new RegExp(`^(${specifiers.map(escape).join("|")})$`) }, async (args) => {
        if (!clientNodeDist.test(args.importer) || args.pluginData?.deferred) return undefined;
        const found = problems(readFileSync(args.importer, "utf8"), args.path);
        if (found.length > 0) return { errors: found.map((text) => ({ text: `${args.importer} ${text} (scripts/deferClientNodeExtras.js)` })) };
        // Where the real module is, resolved as the importer would have.
        const real = await build.resolve(args.path, { kind: args.kind, resolveDir: dirname(args.importer), pluginData: { deferred: true } });
        if (real.errors.length > 0) return { errors: real.errors };
        return { path: real.path, namespace: "deferred", pluginData: { specifier: args.path } };
      });
      build.onLoad({ filter: /.*/, namespace: "deferred" }, (args) => ({
        contents: standIn(args.pluginData.specifier, args.pluginData.specifier.startsWith("node:") ? args.pluginData.specifier : args.path),
        resolveDir: dirname(args.path),
        loader: "js",
      }));
    },
  };
}

module.exports = { deferClientNodeExtras };
