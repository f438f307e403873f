import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createFleetRuntime } from "../../lib/app/runtime.js";
import { localKubeConfig } from "../../lib/kube/localKubeConfig.js";
import { readFleetSettings } from "../../lib/settings/fleet.js";

const dir = mkdtempSync(join(tmpdir(), "gmsa-fleet-runtime-"));
const kubeconfig = join(dir, "kubeconfig");
writeFileSync(
  kubeconfig,
  JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "one", cluster: { server: "https://127.0.0.1:6443" } },
      // Another port: loopback servers are told apart by their port alone.
      { name: "two", cluster: { server: "https://127.0.0.2:6444" } },
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
  assert.is(localKubeConfig({ access: "kubeconfig", kubeconfig, context: "second" }).getCurrentCluster()?.server, "https://127.0.0.2:6444");
});

Runtime("an unknown context keeps that member out of service, naming it and the contexts there are; the others serve", async () => {
  const fleet = readFleetSettings({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig, context: "third" }, beta: { kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secret,
    GMSA_CLUSTER_SECRET_BETA: betaSecret,
  });
  const logged: string[] = [];
  let starts = 0;
  const runtime = await createFleetRuntime(fleet, {
    log: (level, message) => logged.push(`${level} ${message}`),
    startMember: async () => {
      starts += 1;
      return {
        credSpecs: { lookup: async () => ({ kind: "notFound" }) },
        authorizer: { mayUse: async () => ({ allowed: true }) },
        cacheStatus: () => undefined,
        stop: async () => {},
      };
    },
  });
  const expected = `GMSA_CLUSTERS.alpha: the kubeconfig ${kubeconfig} has no context "third" (it has "first", "second")`;
  assert.equal([...runtime.unavailable], [["alpha", expected]]);
  assert.equal([...runtime.members.keys()], ["beta"], "no client is made for alpha");
  const warning = logged.find((line) => line.startsWith("warn ") && line.includes("gmsa.clusterUnavailable"));
  assert.ok(warning, JSON.stringify(logged));
  assert.equal(JSON.parse(warning.slice("warn ".length)), {
    event: "gmsa.clusterUnavailable",
    cluster: "alpha",
    status: 503,
    reason: `cluster "alpha" is not served: ${expected}`,
  });
  // Its secret is fine, so it is checked first.
  const wrong = runtime.router.route({ kind: "path", cluster: "alpha", secret: betaSecret }, "mutate");
  assert.equal(wrong.ok ? 0 : wrong.status, 401);
  const right = runtime.router.route({ kind: "path", cluster: "alpha", secret }, "mutate");
  assert.equal(right.ok ? 0 : right.status, 503);
  const beta = runtime.router.route({ kind: "path", cluster: "beta", secret: betaSecret }, "mutate");
  assert.ok(beta.ok);
  if (beta.ok) await beta.member.credSpecs.lookup("x", { signal: new AbortController().signal });
  assert.is(starts, 1, "beta alone started");
  await runtime.stop();
});

Runtime("an unreadable kubeconfig keeps that member out of service too", async () => {
  const fleet = readFleetSettings({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: join(dir, "missing") }, beta: { kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secret,
    GMSA_CLUSTER_SECRET_BETA: betaSecret,
  });
  const runtime = await createFleetRuntime(fleet, { log: () => {}, startMember: async () => assert.unreachable("no member starts") as never });
  assert.equal([...runtime.unavailable.keys()], ["alpha"]);
  assert.match(runtime.unavailable.get("alpha")!, /^GMSA_CLUSTERS\.alpha: /);
  await runtime.stop();
});

Runtime("kubeconfig members that reach one API server through the contexts they use are both kept out of service", async () => {
  const copy = join(dir, "copy-of-kubeconfig");
  writeFileSync(copy, readFileSync(kubeconfig));
  const cases: Array<[Record<string, unknown>, string[]]> = [
    [{ alpha: { kubeconfig }, beta: { kubeconfig } }, ["alpha", "beta"]],
    [{ alpha: { kubeconfig }, beta: { kubeconfig, context: "first" } }, ["alpha", "beta"]],
    [{ alpha: { kubeconfig, context: "second" }, beta: { kubeconfig: copy, context: "second" } }, ["alpha", "beta"]],
    [{ alpha: { kubeconfig }, beta: { apiServerUrl: "https://127.0.0.1:6443/" } }, ["alpha", "beta"]],
    [{ alpha: { kubeconfig }, beta: { apiServerUrl: "https://localhost:6443" } }, ["alpha", "beta"]],
    [{ alpha: { kubeconfig }, beta: { kubeconfig, context: "second" } }, []],
  ];
  for (const [clusters, expected] of cases) {
    const fleet = readFleetSettings({ GMSA_CLUSTERS: JSON.stringify(clusters), GMSA_CLUSTER_SECRET_ALPHA: secret, GMSA_CLUSTER_SECRET_BETA: betaSecret });
    const runtime = await createFleetRuntime(fleet, { log: () => {}, startMember: async () => assert.unreachable("no member starts") as never });
    assert.equal([...runtime.unavailable.keys()], expected, JSON.stringify(clusters));
    for (const reason of runtime.unavailable.values()) assert.match(reason, "GMSA_CLUSTERS.alpha and GMSA_CLUSTERS.beta name the same cluster");
    assert.equal([...runtime.members.keys()], expected.length === 0 ? ["alpha", "beta"] : []);
    await runtime.stop();
  }
});

Runtime("a member the settings kept out of service gets no client, and its warning line at start-up", async () => {
  const fleet = readFleetSettings({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig }, beta: { kubeconfig, context: "second" } }),
    GMSA_CLUSTER_SECRET_ALPHA: "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/alpha/)",
    GMSA_CLUSTER_SECRET_BETA: betaSecret,
  });
  const logged: string[] = [];
  const runtime = await createFleetRuntime(fleet, {
    log: (level, message) => logged.push(`${level} ${message}`),
    startMember: async () => assert.unreachable("no member starts") as never,
  });
  assert.equal([...runtime.members.keys()], ["beta"]);
  assert.match(runtime.unavailable.get("alpha")!, /^GMSA_CLUSTER_SECRET_ALPHA is a Key Vault reference the platform could not resolve/);
  assert.ok(
    logged.some((line) => line.startsWith("warn ") && line.includes('"cluster":"alpha"') && line.includes("GMSA_CLUSTER_SECRET_ALPHA")),
    JSON.stringify(logged),
  );
  const route = runtime.router.route({ kind: "header", cluster: "alpha", secret: null }, "validate");
  assert.equal(route.ok ? 0 : route.status, 503, "no secret to check: 503 at once");
  await runtime.stop();
});

Runtime("a fleet starts no member's client at start-up; an admission's first call does", async () => {
  let starts = 0;
  const fleet = readFleetSettings({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig }, beta: { kubeconfig, context: "second" } }),
    GMSA_CLUSTER_SECRET_ALPHA: secret,
    GMSA_CLUSTER_SECRET_BETA: betaSecret,
  });
  const runtime = await createFleetRuntime(fleet, {
    startMember: async () => {
      starts += 1;
      return {
        credSpecs: { lookup: async () => ({ kind: "notFound" }) },
        authorizer: { mayUse: async () => ({ allowed: true }) },
        cacheStatus: () => undefined,
        stop: async () => {},
      };
    },
  });
  assert.is(starts, 0);
  const route = runtime.router.route({ kind: "path", cluster: "beta", secret: betaSecret }, "mutate");
  assert.ok(route.ok);
  if (route.ok) {
    assert.is(route.member.name, "beta");
    await route.member.credSpecs.lookup("x", { signal: new AbortController().signal });
  }
  assert.is(starts, 1);
  assert.equal(
    [...runtime.members.values()].map((m) => m.status().state),
    ["idle", "started"],
  );
  await runtime.stop();
});

Runtime.run();
