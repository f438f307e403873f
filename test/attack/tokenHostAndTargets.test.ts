import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readFleetSettings } from "../../lib/settings/fleet.js";

/**
 * Second attack review, the AKS-host rule for a URL member's token and the check that no two
 * members name one cluster.
 */
const Rules = suite("attack: token host rule and same-target check");
const secret = (name: string) => `${name}-0123456789abcdefghijABCDEFGHIJ-_xyz`;

function served(clusters: Record<string, unknown>): { served: string[]; unavailable: Map<string, string> } {
  const env: Record<string, string> = { GMSA_CLUSTERS: JSON.stringify(clusters) };
  for (const name of Object.keys(clusters)) env[`GMSA_CLUSTER_SECRET_${name.toUpperCase()}`] = secret(name);
  const fleet = readFleetSettings(env);
  return { served: fleet.members.map((m) => m.name), unavailable: new Map((fleet.unavailable ?? []).map((m) => [m.name, m.reason])) };
}

// Held: case, trailing dot, default port spelt out or padded, user-info, a look-alike suffix, a
// backslash, a non-AKS port and an IPv4-mapped loopback are all judged on the host the client
// will reach.
for (const [url, ok] of [
  ["https://X.HCP.EASTUS.AZMK8S.IO", true],
  ["https://x.hcp.eastus.azmk8s.io.", true],
  ["https://x.hcp.eastus.azmk8s.io:0443", true],
  ["https://azmk8s.io.evil.example", false],
  ["https://x.hcp.eastus.azmk8s.io@evil.example", false],
  ["https://evil.example\\.azmk8s.io", false],
  ["https://x.hcp.eastus.azmk8s.io:8443", false],
  ["https://[::ffff:127.0.0.1]:6443", false],
] as const) {
  Rules(`holds: apiServerUrl ${url} is ${ok ? "accepted" : "refused"}`, () => {
    assert.equal(served({ a: { apiServerUrl: url } }).served, ok ? ["a"] : []);
  });
}

// TH-1 (failed before its fix): "localhost." was taken for loopback once its dot was dropped, but the resolver
// does not read /etc/hosts for the absolute name and asks DNS, which may answer any address.
Rules("TH-1: https://localhost.:6443 is not taken for loopback", () => {
  const { served: names, unavailable } = served({ a: { apiServerUrl: "https://localhost.:6443" } });
  assert.equal(names, [], "the token would go wherever DNS says localhost. is");
  assert.match(unavailable.get("a") ?? "", /must name an AKS API server/);
});

// DT-1 (failed before its fix): the same-target check compared spellings of a host, not the server: two names
// of one loopback API server passed. (AKS clusters likewise answer on fqdn and azurePortalFQDN:
// not caught offline, and the README says so.)
Rules("DT-1: two members naming one loopback API server by 127.0.0.1 and localhost are both kept out", () => {
  const { served: names } = served({ a: { apiServerUrl: "https://127.0.0.1:6443" }, b: { apiServerUrl: "https://localhost:6443" } });
  assert.equal(names, [], `both were served: ${names.join(", ")}`);
});

Rules.run();
