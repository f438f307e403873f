import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { isIPv4, isIPv6 } from "node:net";

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

/**
 * The widest address block the relay admits. The API server's own subnet (API Server VNet
 * Integration) is a /28; a block as wide as a /16 is a whole VNet or AKS's overlay pod CIDR
 * (10.244.0.0/16), and would admit every pod.
 */
export const widestPrefix = { v4: 24, v6: 112 } as const;

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

const LabelSelector = t.partial({
  matchLabels: t.union([t.null, t.record(t.string, t.string)]),
  matchExpressions: t.union([t.null, t.array(t.type({ key: t.string, operator: t.string, values: t.union([t.undefined, t.null, t.array(t.string)]) }))]),
});
type LabelSelector = t.TypeOf<typeof LabelSelector>;

const StoredPolicy = t.type({
  metadata: t.type({ name: t.string }),
  spec: t.partial({
    podSelector: LabelSelector,
    policyTypes: t.union([t.null, t.array(t.string)]),
    ingress: t.union([
      t.null,
      t.array(
        t.partial({
          from: t.union([
            t.null,
            t.array(
              t.partial({
                podSelector: t.union([t.null, LabelSelector]),
                namespaceSelector: t.union([t.null, LabelSelector]),
                ipBlock: t.union([t.null, t.partial({ cidr: t.string })]),
              }),
            ),
          ]),
        }),
      ),
    ]),
  }),
});

/** Whether a label selector selects an object with these labels (an empty selector selects all). */
export function selects(selector: LabelSelector | null | undefined, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) if (labels[key] !== value) return false;
  for (const { key, operator, values } of selector?.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, key);
    const among = has && (values ?? []).includes(labels[key]!);
    const holds = operator === "In" ? among : operator === "NotIn" ? !among : operator === "Exists" ? has : operator === "DoesNotExist" ? !has : false;
    if (!holds) return false;
  }
  return true;
}

function isEmptySelector(selector: LabelSelector | null | undefined): boolean {
  return selector !== undefined && selector !== null && Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0;
}

/**
 * Why a set of stored NetworkPolicies lets more than the API server reach pods with these labels,
 * or undefined when they do not. NetworkPolicies add up: a pod that some policy selects for
 * ingress takes what any of them allows, and a pod none selects takes everything. Open means: no
 * policy selects the pods; a rule with no `from` (Kubernetes reads it as "from anywhere"); a
 * source that is every pod of every namespace; or an address block wider than a subnet.
 */
export function relayIngressProblem(policies: readonly unknown[], podLabels: Readonly<Record<string, string>>): string | undefined {
  let selected = 0;
  for (const stored of policies) {
    const decoded = StoredPolicy.decode(stored);
    if (isLeft(decoded)) return "a NetworkPolicy in its namespace could not be read";
    const { metadata, spec } = decoded.right;
    if (!selects(spec.podSelector, podLabels)) continue;
    const types = spec.policyTypes ?? ["Ingress"];
    if (!types.includes("Ingress")) continue;
    selected += 1;
    const where = `networkpolicy/${metadata.name}`;
    for (const rule of spec.ingress ?? []) {
      if (rule.from === undefined || rule.from === null || rule.from.length === 0) return `${where} has an ingress rule without sources, which admits every source`;
      for (const peer of rule.from) {
        if (isEmptySelector(peer.namespaceSelector) && (peer.podSelector === undefined || peer.podSelector === null || isEmptySelector(peer.podSelector))) {
          return `${where} admits every pod of every namespace`;
        }
        // Labels are chosen by whoever creates a pod or (often) a namespace: only a namespace's
        // name, which nobody can give another namespace, pins a source down.
        if (peer.namespaceSelector !== undefined && peer.namespaceSelector !== null && peer.namespaceSelector.matchLabels?.["kubernetes.io/metadata.name"] === undefined) {
          return `${where} admits pods of namespaces chosen by labels, not by name: anyone who may label a namespace and create pods there can match it`;
        }
        const cidr = peer.ipBlock?.cidr;
        if (cidr !== undefined && tooWide(cidr)) return `${where} admits ${cidr}, wider than any API server subnet`;
      }
    }
  }
  return selected === 0 ? "no NetworkPolicy selects its pods, so every source may connect" : undefined;
}

function tooWide(cidr: string): boolean {
  const [address = "", bits = ""] = cidr.split("/");
  const prefix = Number(bits);
  if (!Number.isInteger(prefix)) return true;
  // An IPv4-mapped block (::ffff:a.b.c.d/n) is an IPv4 block of n - 96 bits.
  if (/^::ffff:/i.test(address)) return prefix - 96 < widestPrefix.v4;
  return isIPv6(address) ? prefix < widestPrefix.v6 : prefix < widestPrefix.v4;
}
