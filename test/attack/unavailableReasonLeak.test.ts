import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createFleetRuntime } from "../../lib/app/runtime.js";
import { readFleetSettings } from "../../lib/settings/fleet.js";

/**
 * Second attack review, members kept out of service: the reason of a member whose kubeconfig
 * cannot be parsed is the YAML parser's message, which quotes the lines around the fault, so a
 * token or key in the file lands in the gmsa.clusterUnavailable warning, in every 503's warning
 * line and in /metrics (anonymous where the webhooks need no function key). Failed before the reason was cut to the message's first line.
 */
const Leak = suite("attack: an unavailable member's reason");

/** True when `text` holds any 12 characters of `secret` in a row (the parser shows a window of a long line). */
function quotes(text: string, secret: string): boolean {
  for (let i = 0; i + 12 <= secret.length; i++) if (text.includes(secret.slice(i, i + 12))) return true;
  return false;
}

Leak("a malformed kubeconfig's contents are not quoted in the reason, the log or /metrics' source", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-kc-"));
  const file = join(dir, "config");
  const token = "kubeconfig-bearer-token-0123456789abcdef";
  writeFileSync(
    file,
    [
      "apiVersion: v1",
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]',
      "users:",
      "- name: u",
      "  user:",
      `    token: ${token} : : [`,
      "contexts: [{name: x, context: {cluster: c, user: u}}]",
      "current-context: x",
    ].join("\n"),
  );
  const logs: string[] = [];
  const fleet = readFleetSettings({ GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: file } }), GMSA_CLUSTER_SECRET_ALPHA: "0123456789abcdefghijABCDEFGHIJ-_xyz" });
  const runtime = await createFleetRuntime(fleet, { log: (_level, message) => logs.push(message) });
  try {
    const reason = runtime.unavailable.get("alpha");
    assert.ok(reason !== undefined, "alpha is kept out of service");
    assert.match(reason!, /GMSA_CLUSTERS\.alpha/);
    assert.not.ok(quotes(reason!, token), `the reason quotes the kubeconfig: ${reason}`);
    for (const line of logs) assert.not.ok(quotes(line, token), `a log line quotes the kubeconfig: ${line}`);
    const route = runtime.router.route({ kind: "path", cluster: "alpha", secret: "0123456789abcdefghijABCDEFGHIJ-_xyz" }, "mutate");
    assert.is(route.ok, false);
    if (!route.ok) {
      assert.is(route.status, 503);
      assert.not.ok(quotes(route.message, token));
      assert.not.ok(quotes(route.warning ?? "", token), `the 503's warning quotes the kubeconfig: ${route.warning}`);
    }
  } finally {
    await runtime.stop();
  }
});

Leak.run();
