import { suite } from "uvu";
import * as assert from "uvu/assert";
import { findPolicyEngine, policyEngineNamespaces, policyEngineWarning, policyEnginesAmong } from "../../cluster/networkPolicyEngine.js";

const list = (...names: string[]) => ({ apiVersion: "apps/v1", kind: "DaemonSetList", items: names.map((name) => ({ metadata: { name, namespace: "kube-system" } })) });

/** Only pods of a network policy engine make the relay's NetworkPolicy hold. */
const Engine = suite("network policy engine");

Engine("an AKS cluster with Azure NPM, Calico or Cilium has an engine", () => {
  assert.equal(policyEnginesAmong([list("kube-proxy", "azure-npm", "azure-npm-win"), list()]), { kind: "found", engines: ["Azure Network Policy Manager"] });
  assert.equal(policyEnginesAmong([list("kube-proxy"), list("calico-node", "calico-typha")]), { kind: "found", engines: ["Calico"] });
  assert.equal(policyEnginesAmong([list("cilium", "cilium-operator"), list()]), { kind: "found", engines: ["Cilium"] });
});

Engine("a cluster with only kube-proxy, CNI and CSI DaemonSets has none", () => {
  assert.equal(policyEnginesAmong([list("kube-proxy", "azure-cns", "azure-ip-masq-agent", "csi-azuredisk-node", "cloud-node-manager"), list()]), { kind: "none" });
  // A name that merely contains an engine's is not that engine.
  assert.equal(policyEnginesAmong([list("cilium-lookalike", "my-calico-node-exporter"), list()]), { kind: "none" });
});

Engine("a list of another shape is not read as an answer", () => {
  assert.equal(policyEnginesAmong([{ items: [{ name: "cilium" }] }]).kind, "unknown");
});

Engine("reads the engines' namespaces, and only lists", async () => {
  const asked: string[] = [];
  const finding = await findPolicyEngine(async (namespace) => {
    asked.push(namespace);
    return namespace === "calico-system" ? list("calico-node") : list("kube-proxy");
  });
  assert.equal(asked, [...policyEngineNamespaces]);
  assert.equal(finding, { kind: "found", engines: ["Calico"] });
});

Engine("a refused list leaves the answer unknown rather than failing the wiring", async () => {
  const finding = await findPolicyEngine(async () => {
    throw new Error("daemonsets.apps is forbidden");
  });
  assert.equal(finding, { kind: "unknown", reason: "daemonsets.apps is forbidden" });
});

Engine("warns with the consequence when no engine is found, and says nothing when one is", () => {
  assert.is(policyEngineWarning({ kind: "found", engines: ["Cilium"] }), "");
  const none = policyEngineWarning({ kind: "none" });
  assert.match(none, /^warning: no network policy engine found/);
  assert.match(none, /azure-npm, .*calico-node, cilium/);
  assert.match(none, /any pod in the cluster can call the relay/);
  assert.match(none, /forge admission reviews/);
  assert.match(none, /--network-policy/);
  const unknown = policyEngineWarning({ kind: "unknown", reason: "forbidden" });
  assert.match(unknown, /could not tell whether the cluster enforces NetworkPolicies \(forbidden\)/);
  assert.match(unknown, /any pod in the cluster can call the relay/);
});

Engine.run();
