// An esbuild plugin for both builds (scripts/package.ts, scripts/build-host.js). undici's index
// loads every part of undici (HTTP/2 and WebSocket clients, caches, mocks, a SQLite store) and the
// Node built-ins they need, though the bundles take a few names from it: @kubernetes/client-node
// its agents and fetch, the package build the fetch classes (scripts/fetchClasses.js). The plugin
// resolves `undici` to an entry that exports just those names, from the same undici files its
// index exports them from, and fails the build when an importer asks for any other name, so that
// a client-node upgrade cannot get `undefined` silently. The one thing undici's index does besides
// exporting, giving every dispatcher its request/stream/connect methods (the proxy agent tunnels
// with `connect`), is done here too.
"use strict";
const { readFileSync } = require("node:fs");
const { dirname } = require("node:path");

// Each name: the undici file that defines it, and the property of that file's exports, if not the
// whole module.
const entries = {
  Agent: ["./lib/dispatcher/agent.js"],
  ProxyAgent: ["./lib/dispatcher/proxy-agent.js"],
  fetch: ["./lib/web/fetch/index.js", "fetch"],
  // The fetch classes, from the files undici's fetch itself loads: the package build
  // (scripts/fetchClasses.js) gives them to the Functions library in place of Node's globals.
  Request: ["./lib/web/fetch/request.js", "Request"],
  Response: ["./lib/web/fetch/response.js", "Response"],
  Headers: ["./lib/web/fetch/headers.js", "Headers"],
  FormData: ["./lib/web/fetch/formdata.js", "FormData"],
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
          ...Object.entries(entries).map(([name, [file, property]]) => `exports.${name} = require(${JSON.stringify(file)})${property ? `.${property}` : ""};`),
        ].join("\n"),
        resolveDir: args.path,
        loader: "js",
      }));
    },
  };
}

module.exports = { narrowUndici };
