import { isIPv4, isIPv6 } from "node:net";
import { widestPrefix } from "../lib/wiring/relayIngress.js";

/**
 * Who may open a connection to the relay. The relay adds the function key to whatever it
 * forwards, so only the API server should reach it:
 * - `konnectivity`: on AKS the API server's calls into the cluster leave through the
 *   konnectivity agents, pods labelled `app: konnectivity-agent` in kube-system;
 * - a CIDR: clusters whose API server sits in a subnet of the VNet (API Server VNet Integration)
 *   call from that subnet.
 */
export type RelayAllowedSource = { readonly kind: "konnectivity" } | { readonly kind: "cidr"; readonly cidr: string };

export const relayDefaultAllowFrom: readonly RelayAllowedSource[] = [{ kind: "konnectivity" }];

export class AllowFromError extends Error {}

/** The NetworkPolicy peer that stands for an allowed source. */
export function networkPolicyPeer(source: RelayAllowedSource) {
  return source.kind === "konnectivity"
    ? { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { app: "konnectivity-agent" } } }
    : { ipBlock: { cidr: source.cidr } };
}

/** The one ingress rule: these peers (or whatever stands for them), this port only. */
export function relayIngressRule(from: unknown, port: string) {
  return { from, ports: [{ protocol: "TCP", port }] };
}

function bitsOf(address: string): { bits: bigint; width: number } {
  if (isIPv4(address)) {
    return { bits: address.split(".").reduce((acc, octet) => (acc << 8n) | BigInt(Number(octet)), 0n), width: 32 };
  }
  // Expand "::" so that every address has eight groups.
  const [head = "", tail] = address.split("::");
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? headGroups : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill("0"), ...tailGroups];
  return { bits: groups.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n), width: 128 };
}

/** A CIDR as Kubernetes takes it in an ipBlock: a network address, no host bits, not everything. */
export function parseCidr(text: string): string {
  const match = /^([0-9a-fA-F:.]+)\/(\d{1,3})$/.exec(text);
  const address = match?.[1] ?? "";
  if (match === null || (!isIPv4(address) && !isIPv6(address)) || (isIPv6(address) && address.includes("."))) {
    throw new AllowFromError(`${JSON.stringify(text)} is neither "konnectivity" nor a CIDR such as 10.1.2.0/28`);
  }
  const { bits, width } = bitsOf(address);
  const prefix = Number(match[2]);
  if (prefix > width) throw new AllowFromError(`${text}: the prefix length must be at most ${width}`);
  if (prefix === 0) throw new AllowFromError(`${text} allows every address: name the API server's subnet`);
  const widest = isIPv6(address) ? widestPrefix.v6 : widestPrefix.v4;
  if (prefix < widest) throw new AllowFromError(`${text} is wider than /${widest}: that admits far more than the API server; name the API server's subnet`);
  const hostBits = bits & ((1n << BigInt(width - prefix)) - 1n);
  if (hostBits !== 0n) throw new AllowFromError(`${text} has host bits set: give the network address of the subnet`);
  return `${address.toLowerCase()}/${prefix}`;
}

/** `konnectivity,10.1.2.0/28`: a comma-separated list, each entry once. */
export function parseRelayAllowFrom(raw: string): RelayAllowedSource[] {
  const entries = raw.split(",").map((entry) => entry.trim());
  if (entries.some((entry) => entry === "")) throw new AllowFromError(`${JSON.stringify(raw)} has an empty entry`);
  const sources: RelayAllowedSource[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    const source: RelayAllowedSource = entry === "konnectivity" ? { kind: "konnectivity" } : { kind: "cidr", cidr: parseCidr(entry) };
    const key = source.kind === "cidr" ? source.cidr : source.kind;
    if (seen.has(key)) throw new AllowFromError(`${entry} is given twice`);
    seen.add(key);
    sources.push(source);
  }
  return sources;
}

/**
 * Ingress to the relay's pods: only the https port, only from the allowed sources. Kubelet's
 * probes come from the pod's own node, which NetworkPolicy always lets through.
 */
export function relayNetworkPolicy(options: {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly podSelector: Record<string, string>;
  readonly port: string;
  readonly allowFrom: readonly RelayAllowedSource[];
}) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: options.name, namespace: options.namespace, labels: options.labels },
    spec: {
      podSelector: { matchLabels: options.podSelector },
      policyTypes: ["Ingress"],
      // An ingress rule without sources would admit everyone: no source admits nobody.
      ingress: options.allowFrom.length === 0 ? [] : [relayIngressRule(options.allowFrom.map(networkPolicyPeer), options.port)],
    },
  };
}

export { relayIngressProblem, selects, widestPrefix } from "../lib/wiring/relayIngress.js";
