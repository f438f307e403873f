import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { startLocalFleetWebhook, type LocalFleetWebhook } from "../support/localWebhook.js";
import { podNaming, review } from "../support/reviews.js";

/**
 * Attack review of the fleet routes: raw path forms (encodings, case, empty and dot segments,
 * %2F in the cluster or secret segment) sent on the wire as written. None may reach a member
 * without that member's own secret, and none may reach a member other than the one it names.
 */
interface Context {
  alpha: FakeApiServer;
  beta: FakeApiServer;
  webhook: LocalFleetWebhook;
}

const secrets = { alpha: "A".repeat(20) + "alpha-secret-0123456789", beta: "B".repeat(20) + "beta-secret-0123456789x" };
const specName = "webapp1-credspec";

const Paths = suite<Context>("attack: fleet path forms");

Paths.before(async (context) => {
  context.alpha = await startFakeApiServer();
  context.beta = await startFakeApiServer();
  context.webhook = await startLocalFleetWebhook({
    GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: context.alpha.kubeconfig }, beta: { kubeconfig: context.beta.kubeconfig } }),
    GMSA_CLUSTER_SECRET_ALPHA: secrets.alpha,
    GMSA_CLUSTER_SECRET_BETA: secrets.beta,
    GMSA_CREDSPEC_CACHE: "false",
    GMSA_AUTH_CACHE_TTL_SECONDS: "0",
  });
  for (const api of [context.alpha, context.beta]) {
    api.state.credSpecs = new Map([[specName, credSpecFixture(specName) as unknown as Record<string, unknown>]]);
    api.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  }
});

Paths.after(async (context) => {
  await context.webhook.close();
  await context.alpha.close();
  await context.beta.close();
});

const a = secrets.alpha;
const b = secrets.beta;
// [raw path, header secret or undefined]; every one is for a member without its own secret, or
// an attempt to land on alpha while holding beta's secret.
const forms: Array<[string, string | undefined]> = [
  ["/clusters/alpha/mutate", b],
  ["/clusters/alpha/mutate/", b],
  ["/clusters/alpha//mutate", b],
  ["//clusters/alpha/mutate", b],
  ["/clusters/ALPHA/mutate", b],
  ["/Clusters/alpha/mutate", b],
  ["/clusters/%61lpha/mutate", b],
  ["/clusters/alpha%2Fmutate", b],
  [`/clusters/alpha/${b}/mutate`, undefined],
  [`/clusters/alpha/${b}/mutate`, a],
  [`/clusters/alpha/${b}%2F..%2F${a}/mutate`, undefined],
  [`/clusters/beta/${b}/../../alpha/mutate`, undefined],
  [`/clusters/beta/${b}/%2e%2e/%2e%2e/alpha/mutate`, undefined],
  [`/clusters/alpha%2F${a}/mutate`, undefined],
  [`/clusters/alpha/${a.toLowerCase()}/mutate`, undefined],
  [`/clusters/alpha/${a}%20/mutate`, undefined],
  [`/clusters/alpha/${encodeURIComponent(a).replace(/A/g, "%41")}/mutate`, undefined],
  [`/clusters/alpha/${a},${b}/mutate`, undefined],
  ["/clusters/alpha/mutate", `${b}, ${a}`],
  ["/clusters/alpha/mutate", ""],
  ["/clusters/alpha/mutate?x-gmsa-cluster-secret=" + a, undefined],
  [`/mutate`, a],
  [`/clusters/alpha/${a}/../mutate`, undefined],
  [`/clusters/alpha/${a}/mutate/../../beta/mutate`, undefined],
];

for (const [path, header] of forms) {
  Paths(
    `${path} ${header === undefined ? "(no header)" : `(header ${header === a ? "alpha's" : header === b ? "beta's" : JSON.stringify(header.slice(0, 8))})`} reaches no cluster`,
    async (context) => {
      context.alpha.calls.length = 0;
      context.beta.calls.length = 0;
      const reply = await httpsCall(context.webhook.server.url, {
        ca: context.webhook.caPem,
        rawPath: path,
        headers: { "content-type": "application/json", ...(header === undefined ? {} : { "x-gmsa-cluster-secret": header }) },
        body: JSON.stringify(review("CREATE", podNaming(specName))),
      });
      // A path that normalises to beta's own route with beta's secret may reach beta, never alpha.
      assert.is(context.alpha.calls.length, 0, `alpha was asked: ${reply.status} ${reply.text}`);
      if (reply.status === 200) assert.ok(context.beta.calls.length > 0 && !reply.text.includes("alpha"), reply.text);
      else assert.is(context.beta.calls.length, 0);
    },
  );
}

Paths("the control: alpha's path with alpha's secret does reach alpha", async (context) => {
  context.alpha.calls.length = 0;
  const reply = await httpsCall(`${context.webhook.server.url}/clusters/alpha/${a}/mutate`, {
    ca: context.webhook.caPem,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(review("CREATE", podNaming(specName))),
  });
  assert.is(reply.status, 200);
  assert.ok(context.alpha.calls.length > 0);
});

Paths.run();
