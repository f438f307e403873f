import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { repoRoot } from "./bicepTree.js";

/** scripts/check-inputs.sh, azd's preprovision hook and the workflow's first Azure-free step. */
const script = join(repoRoot, "scripts", "check-inputs.sh");
const aks = (name: string) => `/subscriptions/1111/resourceGroups/rg-${name}/providers/Microsoft.ContainerService/managedClusters/aks-${name}`;
const vnet = "/subscriptions/1111/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet-aks";

function check(env: Record<string, string>): { status: number | null; output: string } {
  const result = spawnSync("bash", [script], { encoding: "utf8", env: { PATH: process.env.PATH ?? "", ...env } });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const Inputs = suite("check-inputs.sh");

Inputs("one cluster in public mode needs only its resource ID", () => {
  const ok = check({ GMSA_AKS_RESOURCE_ID: aks("one") });
  assert.is(ok.status, 0, ok.output);
  assert.match(ok.output, /one cluster, public mode: inputs complete/);
  const none = check({});
  assert.is(none.status, 1);
  assert.match(none.output, /nothing was provisioned/);
  assert.match(none.output, /GMSA_AKS_RESOURCE_ID is required: .*azd env set GMSA_AKS_RESOURCE_ID/);
  const wrong = check({ GMSA_AKS_RESOURCE_ID: "/subscriptions/1111/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/x" });
  assert.match(wrong.output, /GMSA_AKS_RESOURCE_ID is not the resource ID of a managed cluster/);
});

Inputs("private mode names each input it lacks, for url and for relay wiring", () => {
  const url = check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_NETWORK_MODE: "private" });
  assert.is(url.status, 1);
  for (const name of ["GMSA_CLUSTER_VNET_ID is required", "DEPLOY_RUNNER_PREFIXES is required", "GMSA_API_SERVER_SUBNET_PREFIXES is required"]) assert.match(url.output, name);
  const relay = check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_NETWORK_MODE: "private", GMSA_PRIVATE_WIRE_MODE: "relay", GMSA_CLUSTER_VNET_ID: vnet, DEPLOY_RUNNER_PREFIXES: '["203.0.113.7/32"]' });
  assert.is(relay.status, 1);
  assert.match(relay.output, /GMSA_RELAY_SOURCE_PREFIXES is required in private mode with relay wiring/);
  assert.not.match(relay.output, /GMSA_CLUSTER_VNET_ID|DEPLOY_RUNNER_PREFIXES/);
  const complete = check({
    GMSA_AKS_RESOURCE_ID: aks("one"),
    GMSA_NETWORK_MODE: "private",
    GMSA_CLUSTER_VNET_ID: vnet,
    DEPLOY_RUNNER_PREFIXES: '["203.0.113.7/32"]',
    GMSA_API_SERVER_SUBNET_PREFIXES: '["10.224.0.0/28"]',
  });
  assert.is(complete.status, 0, complete.output);
  const malformed = check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_CLUSTER_EGRESS_IPS: "20.1.2.3", GMSA_CLUSTER_AZURE_RBAC: "yes" });
  assert.match(malformed.output, /GMSA_CLUSTER_EGRESS_IPS must be a JSON array of strings/);
  assert.match(malformed.output, /GMSA_CLUSTER_AZURE_RBAC must be true or false, not yes/);
  assert.match(check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_API_SERVER_LOGS: "on" }).output, /GMSA_API_SERVER_LOGS must be true or false, not on/);
  assert.is(check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_API_SERVER_LOGS: "true" }).status, 0);
  assert.match(check({ GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_NETWORK_MODE: "hybrid" }).output, /GMSA_NETWORK_MODE must be public or private, not hybrid/);
});

Inputs("a fleet needs a secret for every member, and never prints one", () => {
  const members = JSON.stringify([
    { name: "alpha", aksResourceId: aks("alpha") },
    { name: "beta", aksResourceId: aks("beta") },
  ]);
  const secret = "alpha-secret_0123456789abcdefghijklmnopqrstuvwxyz";
  const partial = check({ GMSA_CLUSTERS: members, GMSA_CLUSTER_SECRETS_B64: Buffer.from(JSON.stringify({ alpha: secret })).toString("base64") });
  assert.is(partial.status, 1);
  assert.match(partial.output, /the fleet's secrets have none for member beta/);
  assert.not.ok(partial.output.includes(secret));
  const complete = check({ GMSA_CLUSTERS: members, GMSA_CLUSTER_SECRETS: JSON.stringify({ alpha: secret, beta: secret.replace("alpha", "beta") }) });
  assert.is(complete.status, 0, complete.output);
  assert.match(complete.output, /a fleet of 2 clusters/);
  assert.match(check({ GMSA_CLUSTERS: members }).output, /GMSA_CLUSTER_SECRETS_B64 is required for a fleet/);
  assert.match(check({ GMSA_CLUSTERS: members, GMSA_AKS_RESOURCE_ID: aks("one"), GMSA_CLUSTER_SECRETS: "{}" }).output, /name the cluster twice/);
});

Inputs.run();
