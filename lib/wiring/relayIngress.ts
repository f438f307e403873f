import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { isIPv6 } from "node:net";
import { isJsonObject } from "../jsonObject.js";

/**
 * Whether the relay's NetworkPolicies let only the API server reach it (the relay adds the
 * function key to whatever it forwards). Read by `npm run wire -- --check` and by the credential
 * spec audit; rendered by cluster/relayNetworkPolicy.ts.
 */

/** The relay's name (its Deployment, Service and NetworkPolicy) and its pods' labels. */
export const relayName = "gmsa-admission-relay";
export const relayPodLabels: Readonly<Record<string, string>> = { "app.kubernetes.io/name": relayName, "app.kubernetes.io/part-of": "gmsa-admission" };

/**
 * The widest address block the relay admits. The API server's own subnet (API Server VNet
 * Integration) is a /28; a block as wide as a /16 is a whole VNet or AKS's overlay pod CIDR
 * (10.244.0.0/16), and would admit every pod.
 */
export const widestPrefix = { v4: 24, v6: 112 } as const;

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

/** Whether a label selector is given and selects everything: no label and no expression to match. */
export function selectsEverything(selector: unknown): boolean {
  if (!isJsonObject(selector)) return false;
  const { matchLabels, matchExpressions } = selector;
  const noLabels = matchLabels === undefined || matchLabels === null || (isJsonObject(matchLabels) && Object.keys(matchLabels).length === 0);
  const noExpressions = matchExpressions === undefined || matchExpressions === null || (Array.isArray(matchExpressions) && matchExpressions.length === 0);
  return noLabels && noExpressions;
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
        if (selectsEverything(peer.namespaceSelector) && (peer.podSelector === undefined || peer.podSelector === null || selectsEverything(peer.podSelector))) {
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
