// An esbuild plugin for both builds (scripts/package.ts, scripts/build-host.js). undici's index
// loads every part of undici (HTTP/2 and WebSocket clients, caches, mocks, a SQLite store) and the
// Node built-ins they need, though @kubernetes/client-node, its only importer here, takes three
// names from it. The plugin resolves `undici` to an entry that exports just those three, from
// the same undici files its index exports them from, and fails the build when an importer asks
// for any other name, so that a client-node upgrade cannot get `undefined` silently. The one thing
// undici's index does besides exporting, giving every dispatcher its request/stream/connect
// methods (the proxy agent tunnels with `connect`), is done here too.
"use strict";
const { readFileSync } = require("node:fs");
const { dirname } = require("node:path");

const entries = {
  Agent: "./lib/dispatcher/agent.js",
  ProxyAgent: "./lib/dispatcher/proxy-agent.js",
  fetch: "./lib/web/fetch/index.js",
};

/** The names a module imports from undici, or undefined when it takes the module whole. */
function importedNames(source) {
  if (/require\(\s*['"]undici['"]\s*\)|import\s+(\*\s+as\s+)?\w+\s*,?\s*(\{[^}]*\})?\s*from\s*['"]undici['"]/.test(source)) return undefined;
  const names = [];
  for (const match of source.matchAll(/import\s*\{([^}]*)\}\s*from\s*['"]undici['"]/g)) {
    for (const part of match[1].split(",")) {
      const name = part.trim().split(/\s+as\s+/)[0];
      if (name) names.push(name);
    }
  }
  return names;
}

function narrowUndici() {
  return {
    name: "narrow-undici",
    setup(build) {
      build.onResolve({ filter: /^undici$/ }, (args) => {
        const names = importedNames(readFileSync(args.importer, "utf8"));
        const missing = names === undefined ? ["the whole module"] : names.filter((name) => !(name in entries));
        if (missing.length > 0) return { errors: [{ text: `${args.importer} imports ${missing.join(", ")} from undici; scripts/narrowUndici.js exports only ${Object.keys(entries).join(", ")}` }] };
        const dir = dirname(require.resolve("undici/package.json", { paths: [dirname(args.importer)] }));
        return { path: dir, namespace: "narrow-undici" };
      });
      build.onLoad({ filter: /.*/, namespace: "narrow-undici" }, (args) => ({
        contents: [
          '"use strict";',
          'Object.assign(require("./lib/dispatcher/dispatcher.js").prototype, require("./lib/api/index.js"));',
          `exports.Agent = require(${JSON.stringify(entries.Agent)});`,
          `exports.ProxyAgent = require(${JSON.stringify(entries.ProxyAgent)});`,
          `exports.fetch = require(${JSON.stringify(entries.fetch)}).fetch;`,
        ].join("\n"),
        resolveDir: args.path,
        loader: "js",
      }));
    },
  };
}

module.exports = { narrowUndici };
