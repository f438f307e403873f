import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import { runCredspec } from "../../cluster/credspecCommand.js";
import { checkReadiness } from "../../cluster/readiness.js";
import type { AuditFinding } from "../../lib/credspec/audit.js";
import { createCertificateAuthority } from "../../controlplane/pki.js";
import { runCanary, type CanaryLine } from "../../lib/app/canary.js";
import { admissionRuntime } from "../../lib/app/runtime.js";
import * as assert from "uvu/assert";
import { clusterManifests } from "../../cluster/manifests.js";
import { relayName, type RelayWiring } from "../../cluster/relay.js";
import { relayCertificateValidityDays } from "../../cluster/relayCertificate.js";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import type { DnsResponder } from "../support/dnsResponder.js";
import { localWebhookUser } from "../../host/localCluster.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { credSpecFixture } from "../support/fixtures.js";
import { observations, type FunctionHostProcess, type Observation } from "../support/functionHostProcess.js";
import { httpsCall, postReview } from "../support/httpsClient.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";
import { followsDns, functionHostName, settledAccessLog, startRelayedFunction, type RelayedFunction } from "../support/relayedFunction.js";
import { startRelayProcess, type RelayProcess } from "../support/relayProcess.js";
import { gmsa, pod, review, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * Relay mode end to end: kube-apiserver → nginx running the relay's config → the function host,
 * which requires the function key that only the relay adds (set up as test/support/relayedFunction.ts
 * says). A fleet member's relay is run here too, in front of a server that records what reaches
 * it; test/e2e/relayFleet.test.ts runs one in front of a function serving a fleet.
 */
const ns = "relayed";
const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);

interface Context {
  cluster: E2eCluster;
  relayed: RelayedFunction;
  dns: DnsResponder;
  functionHost: FunctionHostProcess;
  functionCaPem: string;
  functionKey: string;
  relay: RelayProcess;
  relayWiring: RelayWiring;
  dir: string;
  /** A fleet member's relay (`--cluster alpha`), in front of a server that records what reaches it. */
  memberRelay: RelayProcess;
  recorder: Recorder;
}

const member = { name: "alpha", secret: randomBytes(30).toString("base64url") };

interface Recorded {
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
}

/**
 * Stands in for a fleet's Function App: same name and certificate as the function host, answers
 * 200 to everything and records the path and headers of each request.
 */
interface Recorder {
  readonly port: number;
  readonly requests: Recorded[];
  close(): Promise<void>;
}

function startRecorder(certPem: string, keyPem: string): Promise<Recorder> {
  const requests: Recorded[] = [];
  const server: Server = createServer({ cert: certPem, key: keyPem }, (request, response) => {
    request.resume();
    request.on("end", () => {
      requests.push({ url: request.url ?? "", headers: { ...request.headers } });
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({
        port: typeof address === "object" && address !== null ? address.port : 0,
        requests,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

const Relay = suite<Context>("relay mode through kube-apiserver", {} as Context);

// uvu reports nothing of a failing hook: say what went wrong before it swallows it.
Relay.before(async (context) => {
  try {
    await setUp(context);
  } catch (error) {
    console.error("relay set-up failed:", error);
    throw error;
  }
});

async function setUp(context: Context): Promise<void> {
  context.dir = mkdtempSync(join(tmpdir(), "gmsa-relay-e2e-"));
  context.cluster = await startE2eCluster();
  context.relayed = await startRelayedFunction(context.cluster, { dir: context.dir, serves: { kubeconfig: context.cluster.webhookEnv.KUBECONFIG! } });
  ({ dns: context.dns, functionHost: context.functionHost, functionKey: context.functionKey, relay: context.relay, relayWiring: context.relayWiring } = context.relayed);
  const functionCertificate = context.relayed.functionCertificate;
  context.functionCaPem = functionCertificate.caPem;

  context.recorder = await startRecorder(functionCertificate.certPem, functionCertificate.keyPem);
  context.memberRelay = await startRelayProcess({
    function: { host: functionHostName, port: context.recorder.port },
    functionKey: context.functionKey,
    certificate: context.relayWiring.certificate,
    trustedCaPem: functionCertificate.caPem,
    resolver: context.dns.resolver,
    timeoutSeconds: 5,
    cluster: member,
  });

  await context.cluster.apply([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    ...["web", "nobody"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: ns } })),
    ...useGrant({ name: "use-webapp1", namespace: ns, credSpecs: ["webapp1-credspec"], serviceAccount: "web", namespacedRole: true }),
  ]);
}

Relay.after(async (context) => {
  await context.memberRelay?.close().catch(() => {});
  await context.recorder?.close().catch(() => {});
  await context.relayed?.close().catch(() => {});
  await context.cluster?.close().catch(() => {});
  if (context.dir) rmSync(context.dir, { recursive: true, force: true });
});

let counter = 0;
function windowsPod(serviceAccountName: string, edit: (p: PodSpec) => void = () => {}): PodSpec {
  const p = pod({ name: `relayed-${++counter}`, namespace: ns, serviceAccountName });
  edit(p);
  return p;
}

function create(context: Context, p: PodSpec): Promise<KubeReply> {
  return kubeRequest(context.cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods`, p);
}

const admissions = (context: Context) => context.functionHost.logs.filter((line) => line.includes("gmsa.admission"));

Relay("the relay process runs the ConfigMap's nginx.conf: only where it listens and where its files are differ", async (context) => {
  const configMap = await kubeRequest(context.cluster.admin, "GET", `/api/v1/namespaces/gmsa-admission/configmaps/${relayName}`);
  assert.is(configMap.status, 200);
  // Lines that name a listen address, a file or a DNS server: the only things a place decides.
  const placeBound = /^\s*(listen|ssl_certificate|ssl_certificate_key|include|proxy_ssl_trusted_certificate|pid|\w+_temp_path|access_log|resolver) /;
  // An nginx without `resolve` gets the same upstream server without it (see followsDns).
  const portable = (conf: string) =>
    conf
      .split("\n")
      .filter((line) => !placeBound.test(line))
      .map((line) => (context.relay.reResolve ? line : line.replace(/^(\s*server \S+ .*) resolve;$/, "$1;")));
  assert.equal(portable(context.relay.conf), portable(configMap.body.data["nginx.conf"]));
});

Relay("a GMSA pod is expanded byte-exact through the relay", async (context) => {
  const before = await settledAccessLog(context.relay);
  const expanded = windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const reply = await create(context, expanded);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(reply.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, webapp);
  assert.is(admissions(context).filter((line) => line.includes(`"${expanded.metadata.name}"`)).length, 2, "the function admitted it twice: mutate, validate");
  await settledAccessLog(context.relay);
  const handled = context.relay.accessLog().slice(before);
  assert.ok(
    handled.some((line) => /"POST \/mutate" 200 /.test(line)),
    handled.join("\n"),
  );
  assert.ok(
    handled.some((line) => /"POST \/validate" 200 /.test(line)),
    handled.join("\n"),
  );
  if (followsDns)
    assert.ok(
      context.dns.queries.some((query) => query.startsWith(`${functionHostName} `)),
      "the relay resolved the function's name",
    );
});

Relay("a service account that may not use the credential spec is refused with 403 through the relay (a dry run: a real pod meets the in-cluster policy first)", async (context) => {
  const pod = windowsPod("nobody", (p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const reply = await kubeRequest(context.cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods?dryRun=All`, pod);
  assert.is(reply.status, 403, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.match(reply.body.message, /service account "nobody" in namespace "relayed" is not authorized to use GMSACredentialSpec "webapp1-credspec"/);
});

Relay("the deploy's readiness check passes through the relay: the API server calls it, the relay forwards, the function refuses as it must", async (context) => {
  const ready = await checkReadiness(context.cluster.admin);
  assert.is(ready.hop, "ready", `${ready.summary}\n${ready.detail}`);
});

/** Points both webhook configurations somewhere else for the length of `run`, then back. */
async function withWebhooks(
  context: Context,
  change: (clientConfig: { url: string; caBundle: string }) => { url: string; caBundle: string },
  run: () => Promise<void>,
): Promise<void> {
  const paths = ["mutating", "validating"].map((kind) => `/apis/admissionregistration.k8s.io/v1/${kind}webhookconfigurations/gmsa-admission`);
  const stored = await Promise.all(paths.map((path) => kubeRequest(context.cluster.admin, "GET", path)));
  try {
    for (const [i, path] of paths.entries()) {
      const webhooks = stored[i]!.body.webhooks.map((webhook: { clientConfig: { url: string; caBundle: string } }) => ({ ...webhook, clientConfig: change(webhook.clientConfig) }));
      assert.is((await kubeRequest(context.cluster.admin, "PATCH", path, { webhooks }, "application/merge-patch+json")).status, 200);
    }
    await run();
  } finally {
    for (const [i, path] of paths.entries()) await kubeRequest(context.cluster.admin, "PATCH", path, { webhooks: stored[i]!.body.webhooks }, "application/merge-patch+json");
  }
}

Relay("the canary names the hop when the relay sends a wrong function key", async (context) => {
  const wrongKey = await startRelayProcess({
    function: context.relayWiring.function,
    functionKey: randomBytes(24).toString("base64url"),
    certificate: context.relayWiring.certificate,
    trustedCaPem: context.functionCaPem,
    resolver: context.dns.resolver,
    timeoutSeconds: 5,
  });
  try {
    await withWebhooks(
      context,
      (clientConfig) => ({ ...clientConfig, url: clientConfig.url.replace(context.relay.url, wrongKey.url) }),
      async () => {
        const line = await canaryOnce();
        assert.is(line.outcome, "apiServerToWebhook", `${line.summary}\n${line.detail}`);
        assert.match(line.summary, /the function refused the call with 401 \(the function key the relay sends/, line.detail);
      },
    );
  } finally {
    await wrongKey.close();
  }
  const ready = await canaryOnce();
  assert.is(ready.outcome, "ready");
  // The relay's certificate, as the wiring issued it with its CA.
  assert.ok(ready.caBundleDaysLeft !== null && Math.abs(ready.caBundleDaysLeft - relayCertificateValidityDays) <= 1, `caBundleDaysLeft ${ready.caBundleDaysLeft}`);
});

Relay("the canary names the hop when the webhooks do not trust the relay's certificate", async (context) => {
  const otherCa = await createCertificateAuthority("another relay CA");
  await withWebhooks(
    context,
    (clientConfig) => ({ ...clientConfig, caBundle: Buffer.from(otherCa.certPem).toString("base64") }),
    async () => {
      const line = await canaryOnce();
      assert.is(line.outcome, "apiServerToWebhook", `${line.summary}\n${line.detail}`);
      assert.match(line.summary, /its TLS certificate is not trusted/, line.detail);
    },
  );
  assert.is((await canaryOnce()).outcome, "ready");
});

async function canaryOnce(): Promise<CanaryLine> {
  const lines = await runCanary(await admissionRuntime());
  assert.is(lines.length, 1, JSON.stringify(lines));
  return lines[0]!;
}

Relay("a broken credential spec is refused through the relay's /validate-credspec", async (context) => {
  const before = await settledAccessLog(context.relay);
  const broken = credSpecFixture("webapp1-credspec");
  broken.metadata.name = "relayed-broken";
  broken.credspec!.CmsPlugins = [];
  // A dry run: the in-cluster policy leaves those to the webhook, whose answer this is about.
  const reply = await kubeRequest(context.cluster.admin, "POST", "/apis/windows.k8s.io/v1/gmsacredentialspecs?dryRun=All", broken);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "credspec\.gmsa-admission\.windows\.k8s\.io" denied the request: .*credspec\.CmsPlugins/);
  await settledAccessLog(context.relay);
  const handled = context.relay.accessLog().slice(before);
  assert.ok(
    handled.some((line) => /"POST \/validate-credspec" 200 /.test(line)),
    handled.join("\n"),
  );
});

Relay("the audit reads the relay wiring as rendered, and reports its NetworkPolicy opened to every source", async (context) => {
  const audit = async () => {
    let stdout = "";
    const code = await runCredspec(["audit", "--output", "json"], {
      stdout: (text) => (stdout += text),
      stderr: () => {},
      readFile: (path) => readFileSync(path),
      kubeConfig: () => context.cluster.admin,
    });
    return { code, findings: (JSON.parse(stdout) as { findings: AuditFinding[] }).findings.filter((f) => f.kind === "wiringMissing" || f.kind === "wiringChanged") };
  };
  // The webhooks call the relay's service, as relay wiring renders them (this test's API server
  // reaches the relay process by URL instead: nothing is admitted while they point there).
  const configurations = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"].map((plural) => `/apis/admissionregistration.k8s.io/v1/${plural}/gmsa-admission`);
  const wired = await Promise.all(
    configurations.map(
      async (at) => ((await kubeRequest(context.cluster.admin, "GET", at)).body as { webhooks: Array<{ clientConfig: { url?: string; caBundle?: string } }> }).webhooks,
    ),
  );
  const path = `/apis/networking.k8s.io/v1/namespaces/gmsa-admission/networkpolicies/${relayName}`;
  const stored = (await kubeRequest(context.cluster.admin, "GET", path)).body as { spec: { ingress: Array<{ from?: unknown }> } };
  const from = stored.spec.ingress[0]!.from;
  try {
    for (const [i, at] of configurations.entries()) {
      const webhooks = wired[i]!.map((webhook) => ({
        ...webhook,
        clientConfig: {
          service: { namespace: "gmsa-admission", name: relayName, path: new URL(webhook.clientConfig.url!).pathname, port: 443 },
          caBundle: webhook.clientConfig.caBundle,
        },
      }));
      assert.is((await kubeRequest(context.cluster.admin, "PATCH", at, { webhooks }, "application/merge-patch+json")).status, 200);
    }
    assert.equal((await audit()).findings, []);
    assert.is(
      (await kubeRequest(context.cluster.admin, "PATCH", path, { spec: { ingress: [{ ports: [{ protocol: "TCP", port: "https" }] }] } }, "application/merge-patch+json")).status,
      200,
    );
    const opened = await audit();
    assert.equal(
      opened.findings.map((f) => `${f.severity} ${f.kind} ${f.object}`),
      [`error wiringChanged NetworkPolicy gmsa-admission/${relayName}`],
    );
    assert.match(opened.findings[0]!.problem, /without sources, which admits every source/);
    assert.is(opened.code, 1);
  } finally {
    await kubeRequest(context.cluster.admin, "PATCH", path, { spec: { ingress: [{ from, ports: [{ protocol: "TCP", port: "https" }] }] } }, "application/merge-patch+json");
    for (const [i, at] of configurations.entries()) await kubeRequest(context.cluster.admin, "PATCH", at, { webhooks: wired[i] }, "application/merge-patch+json");
  }
});

Relay("a pod without GMSA settings never reaches the relay", async (context) => {
  const relayed = await settledAccessLog(context.relay);
  const plain = windowsPod("web");
  const reply = await create(context, plain);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(await settledAccessLog(context.relay), relayed);
  assert.not.ok(
    admissions(context).some((line) => line.includes(`"${plain.metadata.name}"`)),
    "the function saw no admission of it",
  );
});

Relay("the function refuses a call without its key; through the relay the same call passes", async (context) => {
  const body = review("CREATE", pod({ namespace: ns }));
  const direct = await postReview(`${context.functionHost.url}/mutate`, context.functionCaPem, body);
  assert.is(direct.status, 401, direct.text);
  const keyed = await httpsCall(`${context.functionHost.url}/mutate`, {
    ca: context.functionCaPem,
    headers: { "content-type": "application/json", "x-functions-key": context.functionKey },
    body: JSON.stringify(body),
  });
  assert.is(keyed.status, 200, keyed.text);
  const relayed = await postReview(`${context.relay.url}/mutate?timeout=5s`, context.relayWiring.certificate.caPem, body);
  assert.is(relayed.status, 200, relayed.text);
  assert.is(JSON.parse(relayed.text).response.uid, body.request.uid);
});

Relay("the relay forwards /mutate and /validate only", async (context) => {
  const health = await httpsCall(`${context.relay.url}/health`, { ca: context.relayWiring.certificate.caPem, method: "GET" });
  assert.is(health.status, 404);
  const nested = await postReview(`${context.relay.url}/mutate/extra`, context.relayWiring.certificate.caPem, {});
  assert.is(nested.status, 404);
});

Relay("the relay's pods pass the restricted pod security profile of their namespace", async (context) => {
  let pods: any[] = [];
  for (let i = 0; i < 50 && pods.length < 2; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    pods = (await kubeRequest(context.cluster.admin, "GET", `/api/v1/namespaces/gmsa-admission/pods`)).body.items;
  }
  assert.is(pods.length, 2, "the ReplicaSet created both pods; Pod Security would have refused them otherwise");
  assert.is(pods[0].spec.automountServiceAccountToken, false);
  assert.equal(pods[0].spec.volumes.map((v: any) => v.name).sort(), ["config", "function-key", "run", "tls"]);
});

/** What reached the function after `since` observations: the requests, and the TLS handshakes. */
function reached(context: Context, since: number): { requests: Array<Extract<Observation, { kind: "request" }>>; handshakes: number } {
  const seen = observations(context.functionHost).slice(since);
  return { requests: seen.flatMap((o) => (o.kind === "request" ? [o] : [])), handshakes: seen.filter((o) => o.kind === "tlsHandshake").length };
}

/** The function's log is written by another process: wait until it has caught up with `count` requests. */
async function functionSaw(context: Context, since: number, count: number): Promise<void> {
  for (let i = 0; i < 50 && reached(context, since).requests.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 100));
}

const forwardedUrl = /^\/(mutate|validate)(\?timeout=[0-9a-z.]+)?$/;

Relay("whatever path a client writes, the function is called on exactly /mutate or /validate", async (context) => {
  const body = JSON.stringify(review("CREATE", pod({ namespace: ns })));
  const paths = [
    "/metrics/..%2Fmutate",
    "/metrics/..%2fmutate?timeout=5s",
    "/mutate/../metrics",
    "/mutate/..%2Fmetrics",
    "//mutate",
    "/mutate%2F..",
    "/mutate%2F..%2Fmetrics",
    "/%6Dutate",
    "/mutate%3Fcode=x",
    "/mutate/.",
    "/./validate",
    "/validate/..%2F..%2Fadmin%2Fhost%2Fkeys",
    "/mutate?timeout=5s&code=stolen",
    "/mutate?timeout=5s%26x=1",
    "/mutate?timeout=1s/../../metrics",
    "/mutate?x=1&timeout=2s",
  ];
  const since = observations(context.functionHost).length;
  const answers: string[] = [];
  for (const rawPath of paths) {
    const reply = await httpsCall(context.relay.url, { ca: context.relayWiring.certificate.caPem, rawPath, headers: { "content-type": "application/json" }, body });
    answers.push(`${rawPath} → ${reply.status}`);
  }
  const forwarded = answers.filter((answer) => answer.endsWith(" 200")).length;
  await functionSaw(context, since, forwarded);
  const { requests } = reached(context, since);
  for (const request of requests) assert.match(request.url, forwardedUrl, `the function was called on ${request.url}:\n${answers.join("\n")}`);
  assert.is(requests.length, forwarded, answers.join("\n"));
  // Only a ?timeout= that reads as a duration rides along, alone.
  assert.ok(
    requests.some((r) => r.url === "/mutate?timeout=5s"),
    "a plain ?timeout= is passed on",
  );
  assert.ok(
    requests.some((r) => r.url === "/mutate?timeout=2s"),
    "?timeout= is passed on whatever comes before it",
  );
  assert.not.ok(
    requests.some((r) => r.url.includes("code")),
    "no other query argument reaches the function",
  );
});

Relay("a client's credentials and forwarding headers never reach the function; the relay's key does", async (context) => {
  const since = observations(context.functionHost).length;
  const reply = await httpsCall(`${context.relay.url}/validate?timeout=5s`, {
    ca: context.relayWiring.certificate.caPem,
    headers: {
      "content-type": "application/json",
      authorization: "Bearer stolen-token",
      "x-forwarded-for": "10.9.8.7",
      "x-forwarded-host": "evil.example",
      "x-forwarded-proto": "http",
      "x-ms-client-principal-id": "00000000-0000-0000-0000-000000000001",
      "x-ms-client-principal-name": "admin@example.com",
      "x-ms-client-principal": "eyJhZG1pbiI6dHJ1ZX0=",
      "x-functions-key": "a-key-the-client-made-up",
      "x-original-url": "/admin/host/keys",
      cookie: "session=abc",
      forwarded: "for=10.9.8.7",
    },
    body: JSON.stringify(review("CREATE", pod({ namespace: ns }))),
  });
  assert.is(reply.status, 200, reply.text);
  await functionSaw(context, since, 1);
  const { requests } = reached(context, since);
  assert.is(requests.length, 1);
  assert.equal(requests[0]!.headers, ["content-length", "content-type", "host", "x-functions-key"]);
});

Relay("admissions share one TLS connection to the function", async (context) => {
  // The pool may already hold a connection from earlier admissions: at most one new handshake.
  const since = observations(context.functionHost).length;
  const count = 12;
  for (let i = 0; i < count; i++) {
    const reply = await postReview(`${context.relay.url}/mutate?timeout=5s`, context.relayWiring.certificate.caPem, review("CREATE", pod({ namespace: ns })));
    assert.is(reply.status, 200, reply.text);
  }
  await functionSaw(context, since, count);
  const { requests, handshakes } = reached(context, since);
  assert.is(requests.length, count);
  assert.ok(handshakes <= 1, `${handshakes} TLS handshakes for ${count} admissions`);
});

/** The recorder's requests from `since` on, once `count` of them are in. */
async function recorded(context: Context, since: number, count: number): Promise<Recorded[]> {
  for (let i = 0; i < 50 && context.recorder.requests.length - since < count; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return context.recorder.requests.slice(since);
}

Relay("a member's relay process runs the nginx.conf a member's ConfigMap holds: only where it listens and where its files are differ", (context) => {
  const rendered = clusterManifests({
    target: { kind: "relay", ...context.relayWiring, function: { host: functionHostName, port: context.recorder.port }, cluster: member },
    subject: { kind: "User", name: localWebhookUser },
  });
  const configMap = rendered.find((object) => object.kind === "ConfigMap") as { data: Record<string, string> } | undefined;
  const placeBound = /^\s*(listen|ssl_certificate|ssl_certificate_key|include|proxy_ssl_trusted_certificate|pid|\w+_temp_path|access_log|resolver) /;
  const portable = (conf: string) =>
    conf
      .split("\n")
      .filter((line) => !placeBound.test(line))
      .map((line) => (context.memberRelay.reResolve ? line : line.replace(/^(\s*server \S+ .*) resolve;$/, "$1;")));
  assert.equal(portable(context.memberRelay.conf), portable(configMap?.data["nginx.conf"] ?? ""));
  const includes = (conf: string) => conf.split("\n").filter((line) => /^\s*include /.test(line)).length;
  assert.is(includes(context.memberRelay.conf), 2, "the key and the member's secret");
  assert.is(includes(configMap?.data["nginx.conf"] ?? ""), 2);
});

Relay("a fleet member's relay calls /clusters/NAME/<webhook> with the member's secret header and the key, and nothing the client sent", async (context) => {
  const since = context.recorder.requests.length;
  const forged = randomBytes(30).toString("base64url");
  for (const path of ["/mutate?timeout=5s", "/validate?timeout=5s", "/validate-credspec"]) {
    const reply = await httpsCall(`${context.memberRelay.url}${path}`, {
      ca: context.relayWiring.certificate.caPem,
      headers: { "content-type": "application/json", "x-gmsa-cluster-secret": forged, "x-functions-key": "a-key-the-client-made-up", authorization: "Bearer stolen-token" },
      body: JSON.stringify(review("CREATE", pod({ namespace: ns }))),
    });
    assert.is(reply.status, 200, `${path}: ${reply.text}`);
  }
  const requests = await recorded(context, since, 3);
  assert.equal(
    requests.map((r) => r.url),
    ["/clusters/alpha/mutate?timeout=5s", "/clusters/alpha/validate?timeout=5s", "/clusters/alpha/validate-credspec"],
  );
  for (const request of requests) {
    assert.equal(Object.keys(request.headers).sort(), ["content-length", "content-type", "host", "x-functions-key", "x-gmsa-cluster-secret"]);
    assert.is(request.headers["x-gmsa-cluster-secret"], member.secret, "the relay's secret, not the client's");
    assert.is(request.headers["x-functions-key"], context.functionKey);
  }
});

Relay("whatever path a client writes, a member's relay calls only its own three paths", async (context) => {
  const body = JSON.stringify(review("CREATE", pod({ namespace: ns })));
  const paths = [
    "/clusters/beta/mutate",
    "/clusters/alpha/mutate",
    "/mutate/../clusters/beta/mutate",
    "/mutate%2F..%2F..%2Fclusters%2Fbeta%2Fmutate",
    "/validate/..%2F..%2Fbeta%2Fvalidate",
    "//mutate",
    "/%6Dutate",
    "/mutate?timeout=5s&x=../../beta",
    "/validate-credspec/extra",
  ];
  const since = context.recorder.requests.length;
  const answers: string[] = [];
  for (const rawPath of paths) {
    const reply = await httpsCall(context.memberRelay.url, { ca: context.relayWiring.certificate.caPem, rawPath, headers: { "content-type": "application/json" }, body });
    answers.push(`${rawPath} → ${reply.status}`);
  }
  const forwarded = answers.filter((answer) => answer.endsWith(" 200")).length;
  const requests = await recorded(context, since, forwarded);
  assert.is(requests.length, forwarded, answers.join("\n"));
  assert.ok(forwarded >= 2, `the normalised spellings of /mutate are forwarded:\n${answers.join("\n")}`);
  for (const request of requests)
    assert.match(request.url, /^\/clusters\/alpha\/(mutate|validate|validate-credspec)(\?timeout=[0-9a-z.]+)?$/, `${request.url}:\n${answers.join("\n")}`);
  for (const refused of ["/clusters/beta/mutate", "/clusters/alpha/mutate", "/mutate/../clusters/beta/mutate"]) assert.ok(answers.includes(`${refused} → 404`), answers.join("\n"));
});

Relay.run();
