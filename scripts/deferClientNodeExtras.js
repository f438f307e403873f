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

/**
 * The import declarations of `specifier` in `source` (their clauses: `{ A, B as C }`, `* as m`,
 * `m`) and the source with them blanked out, so that what remains holds only the uses.
 */
function importsOf(source, specifier) {
  const clauses = [];
  const pattern = new RegExp(`\\bimport\\s+([^;'"]*?)\\s*from\\s*['"]${escape(specifier)}['"]`, "g");
  const rest = source.replace(pattern, (declaration, clause) => {
    clauses.push(clause.trim());
    return " ".repeat(declaration.length);
  });
  return { clauses, rest };
}

/** How `local` is used at each place in `rest`: "new", ".method(", "call", or "other: …". */
function usesOf(rest, local) {
  const uses = [];
  for (const match of rest.matchAll(new RegExp(`(?<![.\\w$])${escape(local)}(?![\\w$])`, "g"))) {
    const before = rest.slice(Math.max(0, match.index - 20), match.index);
    const after = rest.slice(match.index + local.length, match.index + local.length + 80);
    const method = /^\s*\.\s*(\w+)\s*\(/.exec(after);
    if (/\bnew\s+$/.test(before) && /^\s*\(/.test(after)) uses.push("new");
    else if (method) uses.push(`.${method[1]}(`);
    else if (/^\s*\(/.test(after)) uses.push("call");
    else uses.push(`other: ${local}${after.split("\n")[0].slice(0, 30)}`);
  }
  return uses;
}

/** The members read from a namespace or default binding, and any use that is not a member read. */
function membersOf(rest, binding) {
  const members = [];
  const others = [];
  for (const match of rest.matchAll(new RegExp(`(?<![.\\w$])${escape(binding)}(?![\\w$])`, "g"))) {
    const before = rest.slice(Math.max(0, match.index - 20), match.index);
    const member = /^\s*\.\s*(\w+)/.exec(rest.slice(match.index + binding.length, match.index + binding.length + 80));
    if (member && !/\bnew\s+$/.test(before)) members.push(member[1]);
    else others.push(rest.slice(match.index, match.index + 40).split("\n")[0]);
  }
  return { members, others };
}

/** What in `source` (a client-node module) the stand-in for `specifier` would not serve. */
function problems(source, specifier) {
  const entry = deferred[specifier];
  const { clauses, rest } = importsOf(source, specifier);
  const found = [];
  // A re-export, a dynamic import or a require would get the stand-in unchecked.
  // Quoted any way, and with comments between the parenthesis and the name.
  const quoted = `(?:\\/\\*[\\s\\S]*?\\*\\/\\s*)*[\`'"]${escape(specifier)}[\`'"]`;
  if (new RegExp(`\\bfrom\\s*${quoted}|\\b(?:import|require)\\s*\\(\\s*${quoted}|\\bimport\\s*${quoted}`).test(rest)) found.push(`refers to ${specifier} other than in an import declaration`);
  if (clauses.length === 0) found.push(`imports ${specifier} in a way the stand-in does not handle`);
  for (const clause of clauses) {
    const named = /^\{([^}]*)\}$/.exec(clause);
    const binding = /^(?:\*\s*as\s+)?([\w$]+)$/.exec(clause);
    if (entry.import === "named" && named) {
      for (const part of named[1].split(",").map((p) => p.trim()).filter(Boolean)) {
        const [name, local = name] = part.split(/\s+as\s+/);
        const kind = entry.names[name];
        if (!kind) {
          found.push(`uses ${name} of ${specifier}, which has no stand-in`);
          continue;
        }
        for (const use of usesOf(rest, local)) {
          if (kind === "class" && use !== "new") found.push(`uses ${local} other than with new (${use})`);
          if (kind === "function" && use !== "call") found.push(`uses ${local} other than by calling it (${use})`);
          if (Array.isArray(kind) && !kind.some((method) => use === `.${method}(`)) found.push(`uses ${local} other than by calling ${kind.join(" or ")} on it (${use})`);
        }
      }
    } else if (entry.import === "namespace" && binding) {
      const { members, others } = membersOf(rest, binding[1]);
      for (const other of others) found.push(`uses ${binding[1]} other than by reading a function of ${specifier} from it (${other})`);
      for (const name of new Set(members)) if (entry.names[name] !== "function") found.push(`uses ${name} of ${specifier}, which has no stand-in`);
    } else {
      found.push(`imports ${specifier} as \`${clause}\`, which the stand-in does not handle`);
    }
  }
  return found;
}

function standIn(specifier, path) {
  const entry = deferred[specifier];
  const lines = ['"use strict";', "let real;", `const load = () => (real ??= require(${JSON.stringify(path)}));`];
  for (const [name, kind] of Object.entries(entry.names)) {
    if (kind === "class") lines.push(`export function ${name}(...args) { return new (load().${name})(...args); }`);
    else if (kind === "function") lines.push(`export function ${name}(...args) { return load().${name}(...args); }`);
    else lines.push(`export const ${name} = { ${kind.map((method) => `${method}: (...args) => load().${name}.${method}(...args)`).join(", ")} };`);
  }
  if (entry.import === "namespace") lines.push(`export default { ${Object.keys(entry.names).join(", ")} };`);
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

module.exports = { deferClientNodeExtras, deferredModules: Object.keys(deferred) };
