import { suite } from "uvu";
import * as assert from "uvu/assert";
import { fleetRouter, type MemberAddress } from "../../../lib/fleet/fleetRouter.js";

const secretA = "A".repeat(40);
const secretAOld = "a".repeat(40);
const secretB = "B".repeat(40);

const fleet = fleetRouter("fleet", [
  { name: "alpha", secrets: [secretA, secretAOld], member: "member alpha" },
  { name: "beta", secrets: [secretB], member: "member beta" },
]);
const single = fleetRouter("single", [{ name: "default", secrets: [], member: "member default" }]);

const header = (cluster: string, secret: string | null): MemberAddress => ({ kind: "header", cluster, secret });
const path = (cluster: string, secret: string): MemberAddress => ({ kind: "path", cluster, secret });

const Fleet = suite("fleetRouter, fleet mode");

const table: Array<[string, MemberAddress, { status: number; message?: string; member?: string; warning?: RegExp | undefined }]> = [
  ["the secret in the header reaches its member", header("alpha", secretA), { status: 200, member: "member alpha" }],
  ["the secret in the path reaches its member", path("beta", secretB), { status: 200, member: "member beta" }],
  ["the old secret still works during a rotation", path("alpha", secretAOld), { status: 200, member: "member alpha" }],
  ["today's paths are not served", { kind: "top" }, { status: 404, warning: undefined }],
  ["an unknown cluster is 404, not logged", header("gamma", secretA), { status: 404, message: "no such cluster", warning: undefined }],
  [
    "no header is 401, logged naming the cluster",
    header("alpha", null),
    { status: 401, message: "a cluster secret is required", warning: /"cluster":"alpha".*no cluster secret \(header x-gmsa-cluster-secret\)/ },
  ],
  ["an empty path secret is 401", path("alpha", ""), { status: 401, message: "a cluster secret is required", warning: /"cluster":"alpha"/ }],
  ["a wrong secret is 401", path("alpha", "C".repeat(40)), { status: 401, message: "the cluster secret does not match", warning: /"cluster":"alpha".*matches no member/ }],
  ["a prefix of the secret is 401", path("alpha", secretA.slice(0, 39)), { status: 401, message: "the cluster secret does not match" }],
  ["the secret and more is 401", path("alpha", `${secretA}x`), { status: 401, message: "the cluster secret does not match" }],
  [
    "another member's secret is 401, and the log says whose",
    header("alpha", secretB),
    { status: 401, message: "the cluster secret does not match", warning: /request for \\"alpha\\" carried \\"beta\\"'s secret/ },
  ],
  ["names are matched exactly", path("Alpha", secretA), { status: 404 }],
];

for (const [name, address, expected] of table) {
  Fleet(name, () => {
    const route = fleet.route(address, "mutate");
    if (route.ok) {
      assert.is(expected.status, 200, `routed to ${route.member}`);
      assert.is(route.member, expected.member);
      return;
    }
    assert.is(route.status, expected.status);
    if (expected.message) assert.is(route.message, expected.message);
    if ("warning" in expected) {
      if (expected.warning === undefined) assert.is(route.warning, undefined);
      else assert.match(route.warning ?? "", expected.warning);
    }
    // Neither the caller nor the log ever sees a secret.
    for (const secret of [secretA, secretAOld, secretB]) assert.not.match(`${route.message} ${route.warning ?? ""}`, secret);
  });
}

Fleet("the refusal line names the webhook and is JSON", () => {
  const route = fleet.route(header("beta", null), "validate-credspec");
  assert.is(route.ok, false);
  const line = JSON.parse((route as { warning: string }).warning);
  assert.equal([line.event, line.cluster, line.webhook], ["gmsa.clusterSecretRefused", "beta", "validate-credspec"]);
});

Fleet("a member without a secret is a programming error", () => {
  assert.throws(() => fleetRouter("fleet", [{ name: "alpha", secrets: [], member: 1 }]), /needs a secret/);
});

const Unavailable = suite("fleetRouter, members kept out of service by their own settings");

const reason = "GMSA_CLUSTER_SECRET_GAMMA is a Key Vault reference the platform could not resolve";
const accessReason = "GMSA_CLUSTERS.delta.apiServerUrl must name an AKS API server";
const withUnavailable = fleetRouter<string>("fleet", [
  { name: "alpha", secrets: [secretA], member: "member alpha" },
  { name: "gamma", secrets: [], unavailable: reason },
  { name: "delta", secrets: [secretB], unavailable: accessReason },
]);

function refused(address: MemberAddress): { status: number; message: string; warning: string } {
  const route = withUnavailable.route(address, "mutate");
  if (route.ok) return assert.unreachable(`routed to ${route.member}`) as never;
  return { status: route.status, message: route.message, warning: route.warning ?? "" };
}

Unavailable("without a usable secret, any request is 503 at once, whatever it carries", () => {
  for (const address of [header("gamma", null), path("gamma", secretA), path("gamma", "x".repeat(40))]) {
    const route = refused(address);
    assert.is(route.status, 503);
    assert.match(route.message, /^this cluster is not served at the moment: .*\(correlation ID [0-9a-f-]{36}\)/);
  }
});

Unavailable("the caller learns no reason; the warning line gives it under the same correlation ID", () => {
  const route = refused(header("gamma", null));
  assert.not.match(route.message, "Key Vault");
  assert.not.match(route.message, "GMSA_");
  const line = JSON.parse(route.warning);
  assert.equal([line.event, line.cluster, line.webhook], ["gmsa.clusterUnavailable", "gamma", "mutate"]);
  assert.match(line.reason, reason);
  assert.match(route.message, line.correlationId);
  assert.is.not(refused(header("gamma", null)).message, route.message, "each refusal has its own correlation ID");
});

Unavailable("with a usable secret, the secret is checked first: 401 without it or with a wrong one, 503 with it", () => {
  assert.is(refused(header("delta", null)).status, 401);
  assert.is(refused(path("delta", secretA)).status, 401);
  assert.not.match(refused(path("delta", secretA)).warning, accessReason, "a wrong secret is not told the reason, even in the log line");
  const served = refused(path("delta", secretB));
  assert.is(served.status, 503);
  assert.match(JSON.parse(served.warning).reason, accessReason);
});

Unavailable("the other members serve", () => {
  assert.equal(withUnavailable.route(path("alpha", secretA), "mutate"), { ok: true, member: "member alpha" });
});

Fleet.run();
Unavailable.run();

const Single = suite("fleetRouter, single cluster");

Single("today's paths reach the one member, with no secret", () => {
  const route = single.route({ kind: "top" }, "mutate");
  assert.equal(route, { ok: true, member: "member default" });
  assert.is(single.route({ kind: "top" }, "validate"), route, "the same answer every time, made once");
});

Single("the /clusters/ paths are not served, even for its own name", () => {
  assert.is(single.route(header("default", null), "mutate").ok, false);
  const route = single.route(path("default", secretA), "mutate");
  assert.equal(route.ok ? 0 : route.status, 404);
});

Single.run();
