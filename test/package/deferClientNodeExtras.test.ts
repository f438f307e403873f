import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { deferClientNodeExtras } from "../../scripts/deferClientNodeExtras.js";

/**
 * The stand-ins forward only what their table lists, so the build must refuse a client-node
 * that uses anything else of the modules they stand in for.
 */
const Defer = suite("stand-ins for client-node's optional imports");

/** Bundles one module placed where client-node's own modules are, and answers the build's errors. */
async function errorsFor(source: string): Promise<string[]> {
  const dir = join(mkdtempSync(join(tmpdir(), "gmsa-defer-")), "node_modules", "@kubernetes", "client-node", "dist");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.js"), source);
  try {
    await build({ entryPoints: [join(dir, "config.js")], bundle: true, platform: "node", format: "cjs", write: false, logLevel: "silent", nodePaths: [join(__dirname, "..", "..", "node_modules")], plugins: [deferClientNodeExtras()] });
    return [];
  } catch (error) {
    return ((error as { errors?: Array<{ text: string }> }).errors ?? []).map((e) => e.text);
  }
}

Defer("builds what the table covers: constructing an agent, calling a listed method or function", async () => {
  const errors = await errorsFor(
    [
      'import { SocksProxyAgent } from "socks-proxy-agent";',
      'import { SocksClient } from "socks";',
      'import child_process from "node:child_process";',
      "export const make = (url) => new SocksProxyAgent(url);",
      "export const connect = (o) => SocksClient.createConnection(o);",
      "export const run = () => child_process.spawnSync('true');",
    ].join("\n"),
  );
  assert.equal(errors, []);
});

Defer("refuses a name the table does not list", async () => {
  const errors = await errorsFor('import { SocksProxyAgent, SocksProxyAgentOptions } from "socks-proxy-agent";\nexport const a = [new SocksProxyAgent("x"), SocksProxyAgentOptions];');
  assert.ok(errors.some((e) => e.includes("SocksProxyAgentOptions of socks-proxy-agent, which has no stand-in")), errors.join("\n"));
});

Defer("refuses a method the stand-in does not forward, and a class used other than with new", async () => {
  const method = await errorsFor('import { SocksClient } from "socks";\nexport const c = (o) => SocksClient.createUDPFrame(o);');
  assert.ok(method.some((e) => e.includes("uses SocksClient other than by calling createConnection on it (.createUDPFrame(")), method.join("\n"));
  const notNew = await errorsFor('import { HttpsProxyAgent } from "hpagent";\nexport const isAgent = (a) => a instanceof HttpsProxyAgent;');
  assert.ok(notNew.some((e) => e.includes("uses HttpsProxyAgent other than with new")), notNew.join("\n"));
});

Defer("refuses a property of child_process it does not forward", async () => {
  const errors = await errorsFor('import child_process from "node:child_process";\nexport const f = () => child_process.fork("x");');
  assert.ok(errors.some((e) => e.includes("uses fork of node:child_process")), errors.join("\n"));
});

// Ways of reaching a deferred module that a stand-in would serve wrongly (a reviewer's list).
Defer("refuses aliasing, static members, re-exports, dynamic imports, requires and namespace tricks", async () => {
  const cases: Array<[string, string]> = [
    ['import { SocksClient } from "socks";\nexport function f(o) { const C = SocksClient; return C.createUDPFrame(o); }', "uses SocksClient other than by calling createConnection on it"],
    ['import { HttpsProxyAgent } from "hpagent";\nexport const p = HttpsProxyAgent.prototype;', "uses HttpsProxyAgent other than with new"],
    ['import { HttpsProxyAgent } from "hpagent";\nexport const s = () => HttpsProxyAgent.someStatic();', "uses HttpsProxyAgent other than with new"],
    ['export { SocksClient } from "socks";', "refers to socks other than in an import declaration"],
    ['export const load = () => import("hpagent");', "refers to hpagent other than in an import declaration"],
    ['export const load = () => require("socks");', "refers to socks other than in an import declaration"],
    ['import cp from "node:child_process";\nconst { execFileSync } = cp;\nexport const f = () => execFileSync("x");', "uses cp other than by reading a function of node:child_process from it"],
    ['import cp from "node:child_process";\nexport const f = () => cp["execFile"]("x");', "uses cp other than by reading a function of node:child_process from it"],
    ['import { SocksProxyAgent } from "socks-proxy-agent"\nexport const isOne = (a) => a instanceof SocksProxyAgent', "uses SocksProxyAgent other than with new"],
    ["export const load = () => import(`socks`);", "refers to socks other than in an import declaration"],
    ['export const load = () => import(/* lazily */ "socks");', "refers to socks other than in an import declaration"],
    ["export const load = () => require(`hpagent`);", "refers to hpagent other than in an import declaration"],
  ];
  for (const [source, expected] of cases) {
    const errors = await errorsFor(source);
    assert.ok(errors.some((e) => e.includes(expected)), `${source}\n→ ${errors.join("\n") || "no error"}`);
  }
});

Defer.run();
