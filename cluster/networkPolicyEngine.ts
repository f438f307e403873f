import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";

/**
 * Whether the cluster seems to enforce NetworkPolicies. Kubernetes stores a NetworkPolicy either
 * way; only a network policy engine makes it mean anything. Without one, the relay's policy admits
 * every pod, and the relay adds the function key to whatever it forwards. The check is a guess
 * from the engines' well-known DaemonSets, read-only, and it never stops the wiring.
 */
export const knownPolicyEngines: ReadonlyArray<{ readonly daemonSet: string; readonly engine: string }> = [
  { daemonSet: "azure-npm", engine: "Azure Network Policy Manager" },
  { daemonSet: "azure-npm-win", engine: "Azure Network Policy Manager" },
  { daemonSet: "calico-node", engine: "Calico" },
  { daemonSet: "cilium", engine: "Cilium" },
  { daemonSet: "antrea-agent", engine: "Antrea" },
  { daemonSet: "kube-router", engine: "kube-router" },
  { daemonSet: "canal", engine: "Canal" },
  { daemonSet: "weave-net", engine: "Weave Net" },
];

/** Where the engines run: kube-system (AKS's own) and calico-system (the Calico operator's). */
export const policyEngineNamespaces = ["kube-system", "calico-system"] as const;

export type PolicyEngineFinding =
  { readonly kind: "found"; readonly engines: readonly string[] } | { readonly kind: "none" } | { readonly kind: "unknown"; readonly reason: string };

const DaemonSetList = t.type({ items: t.array(t.type({ metadata: t.type({ name: t.string }) })) });

/** Names the engines among DaemonSets found (namespace, list as the API server returned it). */
export function policyEnginesAmong(lists: readonly unknown[]): PolicyEngineFinding {
  const names = new Set<string>();
  for (const list of lists) {
    const decoded = DaemonSetList.decode(list);
    if (isLeft(decoded)) return { kind: "unknown", reason: "a DaemonSet list did not have the expected shape" };
    for (const item of decoded.right.items) names.add(item.metadata.name);
  }
  const engines = [...new Set(knownPolicyEngines.filter(({ daemonSet }) => names.has(daemonSet)).map(({ engine }) => engine))];
  return engines.length > 0 ? { kind: "found", engines } : { kind: "none" };
}

/** Lists the DaemonSets of the engines' namespaces; a refusal (RBAC) leaves the answer unknown. */
export async function findPolicyEngine(listDaemonSets: (namespace: string) => Promise<unknown>): Promise<PolicyEngineFinding> {
  try {
    return policyEnginesAmong(await Promise.all(policyEngineNamespaces.map(listDaemonSets)));
  } catch (error) {
    return { kind: "unknown", reason: error instanceof Error ? error.message : String(error) };
  }
}

const consequence =
  "the relay's NetworkPolicy is then stored but not enforced: any pod in the cluster can call the relay, which adds the function key, " +
  "and forge admission reviews that return the contents of any credential spec some service account may use";

/** What `npm run wire` says on stderr about the finding; nothing when an engine was found. */
export function policyEngineWarning(finding: PolicyEngineFinding): string {
  const looked = `${knownPolicyEngines.map(({ daemonSet }) => daemonSet).join(", ")} in ${policyEngineNamespaces.join(", ")}`;
  const remedy = "Enable network policy on the cluster (AKS: --network-policy azure, calico or cilium), or use url wiring with API Server VNet Integration (docs/wiring.md)";
  switch (finding.kind) {
    case "found":
      return "";
    case "none":
      return `warning: no network policy engine found (looked for the DaemonSets ${looked}): ${consequence}. ${remedy}.\n`;
    case "unknown":
      return `warning: could not tell whether the cluster enforces NetworkPolicies (${finding.reason}); without an engine, ${consequence}. ${remedy}.\n`;
  }
}
