import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadFunctionsApp } from "../../host/functionsHost.js";
import { startFakeApiServer } from "../support/fakeApiServer.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalWebhook } from "../support/localWebhook.js";

/**
 * Attack review, single cluster: the fleet's routes are registered whatever the settings. With
 * a single cluster they must reach nothing, and they must take the same authorization level as
 * today's paths (a function key wherever one is required).
 */
const Single = suite("attack: the fleet routes of a single-cluster app");

Single("every /clusters/… form answers 404 and asks no cluster", async () => {
  const api = await startFakeApiServer();
  const webhook = await startLocalWebhook({ KUBECONFIG: api.kubeconfig, GMSA_CREDSPEC_CACHE: "false" });
  try {
    const secret = "s".repeat(40);
    for (const path of ["/clusters/default/mutate", `/clusters/default/${secret}/mutate`, "/clusters/default/validate-credspec", "/clusters/x/y/validate"]) {
      const reply = await httpsCall(`${webhook.server.url}${path}`, {
        ca: webhook.caPem,
        headers: { "content-type": "application/json", "x-gmsa-cluster-secret": secret },
        body: "{}",
      });
      assert.is(reply.status, 404, `${path}: ${reply.text}`);
    }
    assert.is(api.calls.length, 0);
  } finally {
    await webhook.close();
    await api.close();
  }
});

// After the test above: loading the functions runs their start hook, which needs a runtime.
Single("each webhook's fleet routes are registered with today's path's authorization level", async () => {
  const { registrations } = await loadFunctionsApp();
  for (const webhook of ["mutate", "validate", "validate-credspec"]) {
    const levels = registrations.filter((r) => r.route === webhook || (r.route.startsWith("clusters/") && r.route.endsWith(`/${webhook}`))).map((r) => `${r.route}:${r.authLevel}`);
    assert.is(levels.length, 3, levels.join(" "));
    assert.is(new Set(levels.map((l) => l.split(":")[1])).size, 1, levels.join(" "));
  }
});

Single.run();
