import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createFleetRuntime } from "../../functions/runtime.js";
import { localKubeConfig } from "../../lib/kube/clusterClient.js";
import { readFleetSettings, SettingsError } from "../../lib/settings.js";

const dir = mkdtempSync(join(tmpdir(), "gmsa-fleet-runtime-"));
const kubeconfig = join(dir, "kubeconfig");
writeFileSync(
  kubeconfig,
  JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "one", cluster: { server: "https://127.0.0.1:6443" } },
      { name: "two", cluster: { server: "https://127.0.0.2:6443" } },
    ],
    users: [{ name: "u", user: { token: "t" } }],
    contexts: [
      { name: "first", context: { cluster: "one", user: "u" } },
      { name: "second", context: { cluster: "two", user: "u" } },
    ],
    "current-context": "first",
  }),
);
const secret = "alpha-secret-0123456789".padEnd(32, "s");
const betaSecret = "beta-secret-0123456789".padEnd(32, "b");

const Runtime = suite("the fleet runtime");

Runtime("a member's context picks its cluster out of a shared kubeconfig", () => {
  assert.is(localKubeConfig({ access: "kubeconfig", kubeconfig }).getCurrentCluster()?.server, "https://127.0.0.1:6443");
  assert.is(localKubeConfig({ access: "kubeconfig", kubeconfig, context: "second" }).getCurrentCluster()?.server, "https://127.0.0.2:6443");
});

Runtime("an unknown context stops start-up, naming the member and the contexts there are", async () => {
  const fleet = readFleetSettings({ GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig, context: "third" } }), GMSA_CLUSTER_SECRET_ALPHA: secret });
  try {
    await createFleetRuntime(fleet, { startMember: async () => assert.unreachable("no member starts") as never });
    assert.unreachable("start-up was refused");
  } catch (error) {
    assert.instance(error, SettingsError);
    assert.match((error as Error).message, `GMSA_CLUSTERS.alpha: the kubeconfig ${kubeconfig} has no context "third" (it has "first", "second")`);
  }
});

Runtime("a fleet starts no member's client at start-up; an admission's first call does", async () => {
  let starts = 0;
  const fleet = readFleetSettings({ GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig }, beta: { kubeconfig, context: "second" } }), GMSA_CLUSTER_SECRET_ALPHA: secret, GMSA_CLUSTER_SECRET_BETA: betaSecret });
  const runtime = await createFleetRuntime(fleet, {
    startMember: async () => {
      starts += 1;
      return { credSpecs: { lookup: async () => ({ kind: "notFound" }) }, authorizer: { mayUse: async () => ({ allowed: true }) }, cacheStatus: () => undefined, stop: async () => {} };
    },
  });
  assert.is(starts, 0);
  const route = runtime.router.route({ kind: "path", cluster: "beta", secret: betaSecret }, "mutate");
  assert.ok(route.ok);
  if (route.ok) {
    assert.is(route.member.name, "beta");
    await route.member.credSpecs.lookup("x", new AbortController().signal);
  }
  assert.is(starts, 1);
  assert.equal([...runtime.members.values()].map((m) => m.status().state), ["idle", "started"]);
  await runtime.stop();
});

Runtime.run();
