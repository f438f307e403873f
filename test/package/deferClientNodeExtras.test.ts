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
  assert.ok(method.some((e) => e.includes("calls SocksClient.createUDPFrame")), method.join("\n"));
  const notNew = await errorsFor('import { HttpsProxyAgent } from "hpagent";\nexport const isAgent = (a) => a instanceof HttpsProxyAgent;');
  assert.ok(notNew.some((e) => e.includes("uses HttpsProxyAgent other than with new")), notNew.join("\n"));
});

Defer("refuses a property of child_process it does not forward", async () => {
  const errors = await errorsFor('import child_process from "node:child_process";\nexport const f = () => child_process.fork("x");');
  assert.ok(errors.some((e) => e.includes("uses fork of node:child_process")), errors.join("\n"));
});

Defer.run();
