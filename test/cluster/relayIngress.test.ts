import { suite } from "uvu";
import * as assert from "uvu/assert";
import { relayObjects, relayPodLabels, type RelayWiring } from "../../cluster/relay.js";
import { AllowFromError, parseCidr, relayIngressProblem } from "../../cluster/relayNetworkPolicy.js";

/**
 * What `npm run wire` calls an open relay, judged over the NetworkPolicies stored in its namespace:
 * they add up, so any one that selects the relay's pods and admits more than the API server opens it.
 */
const Ingress = suite("an open relay, from its namespace's NetworkPolicies");

function policy(name: string, spec: Record<string, unknown>) {
  return { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name, namespace: "gmsa-admission" }, spec };
}

const relaySelector = { matchLabels: { "app.kubernetes.io/name": "gmsa-admission-relay" } };
const konnectivity = { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { app: "konnectivity-agent" } } };
const guarded = policy("gmsa-admission-relay", { podSelector: relaySelector, policyTypes: ["Ingress"], ingress: [{ from: [konnectivity], ports: [{ port: "https" }] }] });

Ingress("the policy the wiring renders closes the relay, with either kind of source", () => {
  const certificate = { caPem: "-----CA-----\n", certPem: "-----CERT-----\n", keyPem: "-----KEY-----\n" };
  const relay: RelayWiring = { function: { host: "func-gmsa.azurewebsites.net", port: 443 }, functionKey: "k3y", certificate };
  for (const allowFrom of [undefined, [{ kind: "konnectivity" as const }, { kind: "cidr" as const, cidr: "10.224.0.0/28" }]]) {
    const rendered = relayObjects({ ...relay, ...(allowFrom ? { allowFrom } : {}) }, 5).filter((o) => o.kind === "NetworkPolicy");
    assert.is(rendered.length, 1);
    assert.is(relayIngressProblem(rendered, relayPodLabels), undefined);
  }
  assert.is(relayIngressProblem([guarded], relayPodLabels), undefined);
});

const open: Array<[string, unknown[], RegExp]> = [
  [
    "an ingress rule without from (what the serializer stored)",
    [policy("gmsa-admission-relay", { podSelector: relaySelector, policyTypes: ["Ingress"], ingress: [{ ports: [{ port: "https" }] }] })],
    /without sources/,
  ],
  ["an empty from", [policy("p", { podSelector: relaySelector, ingress: [{ from: [] }] })], /without sources/],
  [
    "a second policy beside the guarded one that admits everyone",
    [guarded, policy("allow-all", { podSelector: {}, policyTypes: ["Ingress"], ingress: [{}] })],
    /networkpolicy\/allow-all has an ingress rule without sources/,
  ],
  ["every pod of every namespace", [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ namespaceSelector: {} }] }] })], /every pod of every namespace/],
  [
    "every pod of every namespace, spelled with both selectors empty",
    [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ namespaceSelector: {}, podSelector: {} }] }] })],
    /every pod of every namespace/,
  ],
  ["half of all addresses", [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "0.0.0.0/1" } }] }] })], /admits 0\.0\.0\.0\/1/],
  ["a whole VNet", [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }] }] })], /wider than any API server subnet/],
  ["an IPv6 block wider than /64", [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "fd00::/48" } }] }] })], /fd00::\/48/],
  ["no policy at all", [], /no NetworkPolicy selects its pods/],
  ["policies for other pods only", [policy("other", { podSelector: { matchLabels: { app: "web" } }, ingress: [{ from: [konnectivity] }] })], /no NetworkPolicy selects/],
  ["an egress-only policy", [policy("egress", { podSelector: relaySelector, policyTypes: ["Egress"], egress: [{}] })], /no NetworkPolicy selects/],
  [
    "an open policy selecting by expression",
    [guarded, policy("expr", { podSelector: { matchExpressions: [{ key: "app.kubernetes.io/part-of", operator: "In", values: ["gmsa-admission"] }] }, ingress: [{}] })],
    /networkpolicy\/expr/,
  ],
];

open.push(
  [
    "pods of any namespace that carry a label anyone can set",
    [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: "konnectivity-agent" } } }] }] })],
    /chosen by labels, not by name/,
  ],
  [
    "namespaces chosen by an expression that matches them all",
    [
      policy("p", {
        podSelector: relaySelector,
        ingress: [
          { from: [{ namespaceSelector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "Exists" }] }, podSelector: { matchLabels: { app: "x" } } }] },
        ],
      }),
    ],
    /chosen by labels, not by name/,
  ],
  [
    "AKS's overlay pod CIDR",
    [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "10.244.0.0/16" } }] }] })],
    /10\.244\.0\.0\/16, wider than any API server subnet/,
  ],
  ["an IPv4-mapped IPv6 block", [policy("p", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "::ffff:0:0/96" } }] }] })], /::ffff:0:0\/96/],
);

for (const [what, policies, why] of open) {
  Ingress(`open: ${what}`, () => {
    assert.match(relayIngressProblem(policies, relayPodLabels) ?? "", why);
  });
}

Ingress("closed: an open policy for other pods, a subnet", () => {
  const others = policy("web", { podSelector: { matchExpressions: [{ key: "app.kubernetes.io/name", operator: "NotIn", values: ["gmsa-admission-relay"] }] }, ingress: [{}] });
  const subnet = policy("subnet", { podSelector: relaySelector, ingress: [{ from: [{ ipBlock: { cidr: "10.224.0.0/28" } }] }] });
  assert.is(relayIngressProblem([guarded, others, subnet], relayPodLabels), undefined);
});

Ingress("--relay-allow-from refuses blocks wider than a subnet, and takes a subnet", () => {
  for (const cidr of ["10.0.0.0/8", "0.0.0.0/1", "10.0.0.0/15", "fd00::/48"])
    assert.throws(
      () => parseCidr(cidr),
      (error: unknown) => error instanceof AllowFromError && /wider than/.test((error as Error).message),
      cidr,
    );
  assert.is(parseCidr("10.1.2.0/24"), "10.1.2.0/24");
  assert.throws(() => parseCidr("10.244.0.0/16"), /wider than/, "AKS's overlay pod CIDR");
  assert.is(parseCidr("10.224.0.0/28"), "10.224.0.0/28");
  assert.is(parseCidr("fd00:1:2:3::100/120"), "fd00:1:2:3::100/120");
});

Ingress.run();
