import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterSecretHeader, clusterSecretSettingName, type FleetMember } from "../../cluster/fleetMember.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { credSpecFixture } from "../support/fixtures.js";
import { observations, type Observation } from "../support/functionHostProcess.js";
import { httpsCall, type ClientReply } from "../support/httpsClient.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";
import { settledAccessLog, startRelayedFunction, type RelayedFunction } from "../support/relayedFunction.js";
import { gmsa, pod, review, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * A fleet member wired in relay mode, end to end through real software: kube-apiserver → the
 * nginx of a relay rendered for `--cluster alpha` → the function host in fleet mode, function keys
 * required, alpha's access being this control plane's webhook kubeconfig. The relay alone knows
 * alpha's secret and adds it as a header on alpha's paths; the function answers nothing for
 * alpha without it.
 *
 * Beta is a second member so that a request for alpha can carry another member's secret. Its
 * access names an API server on a loopback port nothing serves (two members may not name one
 * cluster), but nothing here ever admits for beta, and a member's client starts only on its
 * first admission.
 *
 * That the member relay's own paths lead to alpha's paths and nowhere else, whatever a client
 * writes, is test/e2e/relay.test.ts's (against a server that records what reaches it).
 */
const ns = "fleet-relayed";
const specName = "alpha-webapp";
const alpha: FleetMember = { name: "alpha", secret: randomBytes(32).toString("base64url") };
const beta: FleetMember = { name: "beta", secret: randomBytes(32).toString("base64url") };

/** A credential spec this cluster alone holds: its domain names the member. */
function alphaSpec(): KubernetesObject & { credspec: Record<string, unknown> } {
  const fixture = credSpecFixture("webapp1-credspec");
  const credspec = fixture.credspec ?? {};
  const domain = typeof credspec.DomainJoinConfig === "object" ? credspec.DomainJoinConfig : {};
  return {
    apiVersion: fixture.apiVersion,
    kind: fixture.kind,
    metadata: { name: specName },
    credspec: { ...credspec, DomainJoinConfig: { ...domain, DnsName: "alpha.contoso.com" } },
  };
}

interface Context {
  cluster: E2eCluster;
  relayed: RelayedFunction;
  dir: string;
}

const RelayFleet = suite<Context>("a fleet member in relay mode through kube-apiserver", {} as Context);

RelayFleet.before(async (context) => {
  try {
    context.dir = mkdtempSync(join(tmpdir(), "gmsa-relay-fleet-e2e-"));
    context.cluster = await startE2eCluster();
    // Before the relay is wired in: a relay that fails shows in the tests, not here.
    await context.cluster.apply([
      alphaSpec(),
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      ...["web", "nobody"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: ns } })),
      ...useGrant({ name: "use-alpha-webapp", namespace: ns, credSpecs: [specName], serviceAccount: "web", namespacedRole: true }),
    ]);
    const kubeconfig = context.cluster.webhookEnv.KUBECONFIG!;
    context.relayed = await startRelayedFunction(context.cluster, {
      dir: context.dir,
      serves: {
        fleet: {
          GMSA_CLUSTERS: JSON.stringify({ [alpha.name]: { kubeconfig }, [beta.name]: { apiServerUrl: "https://127.0.0.1:1" } }),
          [clusterSecretSettingName(alpha.name)]: alpha.secret,
          [clusterSecretSettingName(beta.name)]: beta.secret,
        },
      },
      member: alpha,
    });
  } catch (error) {
    // uvu reports nothing of a failing hook: say what went wrong before it swallows it.
    console.error("relay fleet set-up failed:", error);
    throw error;
  }
});

RelayFleet.after(async (context) => {
  await context.relayed?.close().catch(() => {});
  await context.cluster?.close().catch(() => {});
  if (context.dir) rmSync(context.dir, { recursive: true, force: true });
});

let counter = 0;
function windowsPod(serviceAccountName: string): PodSpec {
  const p = pod({ name: `fleet-relayed-${++counter}`, namespace: ns, serviceAccountName });
  p.spec.securityContext = gmsa(specName);
  return p;
}

function create(context: Context, p: PodSpec): Promise<KubeReply> {
  return kubeRequest(context.cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods`, p);
}

/** The function host's log is written by another process: wait a little for what is not there yet. */
async function eventually<T>(read: () => T, done: (value: T) => boolean): Promise<T> {
  let value = read();
  for (let i = 0; i < 50 && !done(value); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    value = read();
  }
  return value;
}

const AdmissionLine = t.type({ event: t.literal("gmsa.admission"), cluster: t.string, webhook: t.string, pod: t.union([t.string, t.null]), decision: t.string });
const RefusalLine = t.type({ event: t.literal("gmsa.clusterSecretRefused"), cluster: t.string, webhook: t.string, reason: t.string });

/** The function host's log lines of one kind, with their level, decoded. */
function logged<A>(context: Context, codec: t.Decoder<unknown, A>): Array<{ level: string; line: A }> {
  return context.relayed.functionHost.logs.flatMap((raw) => {
    const space = raw.indexOf(" ");
    if (space < 0 || !raw.slice(space + 1).startsWith("{")) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.slice(space + 1));
    } catch {
      return [];
    }
    const decoded = codec.decode(parsed);
    return isLeft(decoded) ? [] : [{ level: raw.slice(0, space), line: decoded.right }];
  });
}

/** The requests that reached the function host after `since` observations. */
function requestsSince(context: Context, since: number): Array<Extract<Observation, { kind: "request" }>> {
  return observations(context.relayed.functionHost)
    .slice(since)
    .flatMap((o) => (o.kind === "request" ? [o] : []));
}

RelayFleet("a GMSA pod is admitted with alpha's credential spec inlined, mutated and validated on alpha's paths with its secret", async (context) => {
  const since = observations(context.relayed.functionHost).length;
  const before = await settledAccessLog(context.relayed.relay);
  const p = windowsPod("web");
  const reply = await create(context, p);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(reply.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, canonicalJson(alphaSpec().credspec));

  // The function admitted it twice, as alpha.
  const lines = await eventually(
    () => logged(context, AdmissionLine).filter((l) => l.line.pod === p.metadata.name),
    (found) => found.length >= 2,
  );
  assert.equal(lines.map((l) => `${l.line.cluster} ${l.line.webhook} ${l.line.decision}`).sort(), ["alpha mutate patched", "alpha validate allowed"]);

  // The API server called the relay's own paths; the relay called alpha's, with the key and the secret.
  await settledAccessLog(context.relayed.relay);
  const handled = context.relayed.relay.accessLog().slice(before);
  assert.ok(
    handled.some((line) => /"POST \/mutate" 200 /.test(line)),
    handled.join("\n"),
  );
  assert.ok(
    handled.some((line) => /"POST \/validate" 200 /.test(line)),
    handled.join("\n"),
  );
  const requests = await eventually(
    () => requestsSince(context, since),
    (found) => found.length >= 2,
  );
  assert.equal(requests.map((r) => r.url.replace(/\?timeout=.*$/, "")).sort(), ["/clusters/alpha/mutate", "/clusters/alpha/validate"]);
  for (const request of requests) {
    assert.match(request.url, /\?timeout=\d+s$/, "the API server's timeout rides along");
    assert.equal(request.headers, ["content-length", "content-type", "host", "x-functions-key", clusterSecretHeader]);
  }
});

RelayFleet(
  "a service account that may not use alpha's credential spec is refused with 403 and the product's message (a dry run: a real pod meets the in-cluster policy first)",
  async (context) => {
    const reply = await kubeRequest(context.cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods?dryRun=All`, windowsPod("nobody"));
    assert.is(reply.status, 403, JSON.stringify(reply.body));
    assert.match(reply.body.message, /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
    assert.match(reply.body.message, new RegExp(`service account "nobody" in namespace "${ns}" is not authorized to use GMSACredentialSpec "${specName}"`));
    const denied = logged(context, AdmissionLine).filter((l) => l.line.decision === "denied");
    assert.ok(denied.length > 0 && denied.every((l) => l.line.cluster === "alpha"), JSON.stringify(denied));
  },
);

RelayFleet("a broken credential spec is refused through alpha's /validate-credspec", async (context) => {
  const since = observations(context.relayed.functionHost).length;
  const broken = alphaSpec();
  broken.metadata.name = "alpha-broken";
  broken.credspec.CmsPlugins = [];
  // A dry run: the in-cluster policy leaves those to the webhook, whose answer this is about.
  const reply = await kubeRequest(context.cluster.admin, "POST", "/apis/windows.k8s.io/v1/gmsacredentialspecs?dryRun=All", broken);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "credspec\.gmsa-admission\.windows\.k8s\.io" denied the request: .*credspec\.CmsPlugins/);
  const requests = await eventually(
    () => requestsSince(context, since),
    (found) => found.length >= 1,
  );
  assert.ok(
    requests.some((r) => r.url.startsWith("/clusters/alpha/validate-credspec")),
    JSON.stringify(requests),
  );
});

/** A review posted straight to the function host with the function key and, if given, a secret header. */
function direct(context: Context, path: string, secret: string | undefined, withKey = true): Promise<ClientReply> {
  return httpsCall(`${context.relayed.functionHost.url}${path}`, {
    ca: context.relayed.functionCertificate.caPem,
    headers: {
      "content-type": "application/json",
      ...(withKey ? { "x-functions-key": context.relayed.functionKey } : {}),
      ...(secret === undefined ? {} : { [clusterSecretHeader]: secret }),
    },
    body: JSON.stringify(review("CREATE", windowsPod("web"))),
  });
}

RelayFleet("straight to the function with its key, alpha's paths refuse no secret and another member's with 401, and the log says so", async (context) => {
  const refusalsBefore = logged(context, RefusalLine).length;
  const cases = [
    { secret: undefined, message: "a cluster secret is required", reason: `no cluster secret (header ${clusterSecretHeader})` },
    { secret: beta.secret, message: "the cluster secret does not match", reason: `request for "alpha" carried "beta"'s secret` },
    { secret: randomBytes(32).toString("base64url"), message: "the cluster secret does not match", reason: "a cluster secret that matches no member" },
  ];
  for (const webhook of ["mutate", "validate"]) {
    for (const { secret, message } of cases) {
      const reply = await direct(context, `/clusters/alpha/${webhook}`, secret);
      assert.is(reply.status, 401, `${webhook}, ${secret === beta.secret ? "beta's secret" : "no/another secret"}: ${reply.text}`);
      assert.is(reply.text.trim(), message);
    }
  }
  const refusals = await eventually(
    () => logged(context, RefusalLine).slice(refusalsBefore),
    (found) => found.length >= 2 * cases.length,
  );
  assert.is(refusals.length, 2 * cases.length, JSON.stringify(refusals));
  for (const { level, line } of refusals) {
    assert.is(level, "warning");
    assert.is(line.cluster, "alpha");
  }
  for (const { reason } of cases)
    assert.ok(
      refusals.some((r) => r.line.reason.includes(reason)),
      `${reason} in ${JSON.stringify(refusals)}`,
    );
  const log = context.relayed.functionHost.logs.join("\n");
  for (const secret of [alpha.secret, beta.secret, context.relayed.functionKey]) assert.not.ok(log.includes(secret), "no secret in the function's log");

  // The same call with alpha's own secret is answered: the secret alone made the difference.
  const own = await direct(context, "/clusters/alpha/validate", alpha.secret);
  assert.is(own.status, 200, own.text);
  // The function key still guards alpha's paths, secret or not; today's paths serve no member.
  const keyless = await direct(context, "/clusters/alpha/validate", alpha.secret, false);
  assert.is(keyless.status, 401, keyless.text);
  assert.match(keyless.text, /function key is required/);
  const topLevel = await direct(context, "/validate", alpha.secret);
  assert.is(topLevel.status, 404, topLevel.text);
});

const MemberMetrics = t.type({ state: t.string, admissions: t.number, starts: t.number });
const Metrics = t.type({ mode: t.string, clusters: t.record(t.string, MemberMetrics) });

RelayFleet("the function's /metrics shows alpha's client started by its admissions and beta's never started", async (context) => {
  const reply = await httpsCall(`${context.relayed.functionHost.url}/metrics`, {
    ca: context.relayed.functionCertificate.caPem,
    method: "GET",
    headers: { "x-functions-key": context.relayed.functionKey },
  });
  assert.is(reply.status, 200, reply.text);
  const decoded = Metrics.decode(JSON.parse(reply.text));
  if (isLeft(decoded)) return assert.unreachable(`/metrics: ${reply.text}`);
  const { mode, clusters } = decoded.right;
  assert.is(mode, "fleet");
  assert.equal(Object.keys(clusters).sort(), ["alpha", "beta"]);
  assert.is(clusters.alpha?.state, "started");
  assert.is(clusters.alpha?.starts, 1);
  assert.ok((clusters.alpha?.admissions ?? 0) >= 4, JSON.stringify(clusters.alpha));
  // Refused requests for alpha start nothing for beta, whose secret they carried.
  assert.equal(clusters.beta, { ...clusters.beta!, state: "idle", admissions: 0, starts: 0 });
});

RelayFleet.run();
