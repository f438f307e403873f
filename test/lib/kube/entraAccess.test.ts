import { DefaultAzureCredential } from "@azure/identity";
import { KubeConfig } from "@kubernetes/client-node";
import * as https from "node:https";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { stringify } from "yaml";
import { applyObjects } from "../../../cluster/applyObjects.js";
import { credSpecCrd } from "../../../lib/wiring/credSpecCrd.js";
import type { KubernetesObject as Manifest } from "../../../cluster/manifests.js";
import { webhookClusterRole, webhookClusterRoleName } from "../../../cluster/webhookRbac.js";
import { createCertificateAuthority, issueCertificate, type CertificateAuthority } from "../../../controlplane/pki.js";
import { startControlPlane, type ControlPlane } from "../../../controlplane/start.js";
import type { ArmFetch } from "../../../lib/kube/aksClusterEndpoint.js";
import { ApiServerHostError } from "../../../lib/kube/aksApiServerHost.js";
import { AksResourceIdError } from "../../../lib/kube/aksResourceId.js";
import { apiServerConnection, ApiServerConnectionError, type ApiReply, type ApiServerConnection, type ApiServerCredentials } from "../../../lib/kube/apiServerConnection.js";
import { EntraAccessError, aksServerScope, azureCredential } from "../../../lib/kube/entraAccess.js";
import { entraApiAccess, type EntraApiAccess } from "../../../lib/kube/entraApiAccess.js";
import { EntraTokenError } from "../../../lib/kube/entraTokenCache.js";
import { isRefreshable } from "../../../lib/kube/refreshableCredential.js";
import { fakeCredential, manualClock } from "../../support/fakeCredential.js";
import { portsFor } from "../../../lib/kube/clusterClient.js";
import { readAdmissionSettings } from "../../../lib/settings/admission.js";

const hour = 3_600_000;

// ---------------------------------------------------------------------------------------------
// Without a cluster: what entraApiAccess accepts, and which credential azureCredential picks.

const Options = suite<{ ca: CertificateAuthority }>("entraApiAccess options");

Options.before(async (context) => {
  try {
    context.ca = await createCertificateAuthority("options-ca");
  } catch (error) {
    console.error("entraApiAccess options: setup failed", error);
    throw error;
  }
});

async function refusal(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    assert.instance(error, Error);
    return error as Error;
  }
  assert.unreachable("should have been refused");
  throw new Error("unreachable");
}

const someToken = () => fakeCredential([{ token: "A", lifetimeMs: hour }]);
const resourceId = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one";

Options("a resource ID or a server URL, not both and not neither", async () => {
  const both = await refusal(() => entraApiAccess({ credential: someToken(), resourceId, server: "https://aks.example" }));
  assert.instance(both, EntraAccessError);
  assert.match(both.message, "not both");
  const neither = await refusal(() => entraApiAccess({ credential: someToken(), server: "  " }));
  assert.match(neither.message, "give the managed cluster's resource ID, or its API server URL and CA");
  const caWithId = await refusal(() => entraApiAccess({ credential: someToken(), resourceId, caPem: "x" }));
  assert.match(caWithId.message, "with a resource ID the CA is read from Azure Resource Manager");
});

Options("a malformed resource ID is refused before any call", async () => {
  const credential = someToken();
  const error = await refusal(() => entraApiAccess({ credential, resourceId: "/subscriptions/x/resourceGroups/rg" }));
  assert.instance(error, AksResourceIdError);
  assert.is(credential.calls.length, 0);
});

Options("the API server must be https", async () => {
  const error = await refusal(() => entraApiAccess({ credential: someToken(), server: "http://127.0.0.1:8080" }));
  assert.match(error.message, "the API server URL: the API server URL must be https, not http");
});

Options("the first token is fetched up front, so a broken identity fails at start", async () => {
  const credential = fakeCredential([{ fail: "ManagedIdentityCredential: no managed identity endpoint" }]);
  const error = await refusal(() => entraApiAccess({ credential, server: "https://aks.example", caPem: "" }));
  assert.instance(error, EntraTokenError);
  assert.match(error.message, `could not get a Microsoft Entra token for the AKS API server (scope ${aksServerScope})`);
});

Options("websocket and proto requests (applyToHTTPSOptions) get the bearer token and the CA too", async ({ ca }) => {
  const kc = await entraApiAccess({ credential: someToken(), server: "https://aks.example:443", caPem: ca.certPem });
  const options: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  assert.equal(options.headers, { Authorization: "Bearer A" });
  assert.is(String(options.ca), ca.certPem.trim() + "\n");
  assert.is(kc.getCurrentUser()?.token, undefined, "no token is kept in the kubeconfig itself");
});

Options("with the server given directly, there is nothing to refresh", async ({ ca }) => {
  const kc = await entraApiAccess({ credential: someToken(), server: "https://aks.example", caPem: Buffer.from(ca.certPem).toString("base64") });
  const refresh = await kc.refreshClusterCredentials();
  assert.is(refresh.outcome, "skipped");
});

const aksHost = "aks-one-dns-1a2b3c4d.hcp.westeurope.azmk8s.io";

/** ARM as a script: the cluster resource declares `names`; listClusterUserCredential points at `server`, or fails with `status`. */
interface ScriptedArm {
  readonly fetch: ArmFetch;
  readonly sent: Array<{ method: string; url: string }>;
  names: string[];
  server: string;
  status: number;
}

function scriptedArm(caPem: string, names: string[], server: string): ScriptedArm {
  const arm: ScriptedArm = {
    sent: [],
    names,
    server,
    status: 200,
    fetch: async (url, init) => {
      arm.sent.push({ method: init.method, url });
      if (init.method === "GET") return new Response(JSON.stringify({ properties: { fqdn: arm.names[0], privateFQDN: arm.names[1] } }), { status: 200 });
      if (arm.status !== 200) return new Response(JSON.stringify({ error: { code: "AuthorizationFailed", message: "no" } }), { status: arm.status });
      const kubeconfig = stringify({ clusters: [{ name: "aks-one", cluster: { server: arm.server, "certificate-authority-data": Buffer.from(caPem).toString("base64") } }] });
      return new Response(JSON.stringify({ kubeconfigs: [{ name: "clusterUser", value: Buffer.from(kubeconfig).toString("base64") }] }), { status: 200 });
    },
  };
  return arm;
}

Options("with a resource ID, an API server the cluster resource declares is accepted", async ({ ca }) => {
  const arm = scriptedArm(ca.certPem, [aksHost, "aks-one.privatelink.westeurope.azmk8s.io"], `https://${aksHost}:443`);
  const credential = someToken();
  const kc = await entraApiAccess({ credential, resourceId, armFetch: arm.fetch });
  assert.is(kc.server, `https://${aksHost}`);
  assert.equal(arm.sent.map((s) => s.method).sort(), ["GET", "POST"]);
  // One ARM token for both reads, then the API server's.
  assert.equal(
    credential.calls.map((c) => c.scopes),
    ["https://management.azure.com/.default", aksServerScope],
  );
});

Options("with a resource ID, the two ARM reads are made at once: neither waits for the other's answer", async ({ ca }) => {
  const arm = scriptedArm(ca.certPem, [aksHost], `https://${aksHost}:443`);
  // Each read is answered only once the other has been sent: made one after the other, the
  // first would never be answered, and start-up would fail at its ARM timeout.
  const sent = { GET: Promise.withResolvers<void>(), POST: Promise.withResolvers<void>() };
  const answer = arm.fetch;
  const fetch: ArmFetch = async (url, init) => {
    sent[init.method].resolve();
    await sent[init.method === "GET" ? "POST" : "GET"].promise;
    return answer(url, init);
  };
  const kc = await entraApiAccess({ credential: someToken(), resourceId, armFetch: fetch, armTimeoutMs: 2000, armRetryDelayMs: 10 });
  assert.is(kc.server, `https://${aksHost}`);
});

const foreignServers: Array<[string, string[], string, RegExp]> = [
  ["a host the cluster does not declare", [aksHost], "https://attacker.example", /attacker\.example, which is not a host name the managed cluster declares/],
  ["another port", [aksHost], `https://${aksHost}:8443`, /uses port 8443/],
  ["a loopback address, without the test seam", ["127.0.0.1"], "https://127.0.0.1:6443", /is an IP address/],
];
for (const [what, names, server, message] of foreignServers) {
  Options(`ARM naming ${what} stops start-up, and no AKS token is fetched`, async ({ ca }) => {
    const arm = scriptedArm(ca.certPem, names, server);
    const credential = someToken();
    const error = await refusal(() => entraApiAccess({ credential, resourceId, armFetch: arm.fetch }));
    assert.instance(error, ApiServerHostError);
    assert.match(error.message, message);
    assert.match(error.message, `listClusterUserCredential for ${resourceId}`);
    assert.not.ok(
      credential.calls.some((c) => c.scopes === aksServerScope),
      "the token for the API server was never fetched",
    );
  });
}

Options("the loopback test seam is refused unless ARM itself is a test's, on loopback", async ({ ca }) => {
  const arm = scriptedArm(ca.certPem, ["127.0.0.1"], "https://127.0.0.1:6443");
  const error = await refusal(() => entraApiAccess({ credential: someToken(), resourceId, armFetch: arm.fetch, loopbackApiServerForTests: true }));
  assert.instance(error, EntraAccessError);
  assert.match(error.message, "only from a test's ARM endpoint on loopback");
  assert.is(arm.sent.length, 0);
});

Options("a failed re-read keeps the endpoint in use, and the next try waits its turn", async ({ ca }) => {
  const clock = manualClock();
  const arm = scriptedArm(ca.certPem, [aksHost], `https://${aksHost}`);
  const kc = await entraApiAccess({ credential: someToken(), resourceId, armFetch: arm.fetch, now: clock.now });
  assert.is(kc.server, `https://${aksHost}`);
  arm.status = 403;
  clock.advance(30_000);
  const error = await refusal(() => kc.refreshClusterCredentials());
  assert.match(error.message, "Azure Resource Manager answered 403 to listClusterUserCredential");
  assert.is(kc.server, `https://${aksHost}`);
  assert.is((await kc.refreshClusterCredentials()).outcome, "skipped", "a failure counts: ARM is not hammered");
  assert.is(arm.sent.filter((s) => s.method === "POST").length, 2);
});

Options("a re-read that names a host the cluster does not declare is refused, and the endpoint stays", async ({ ca }) => {
  const clock = manualClock();
  const arm = scriptedArm(ca.certPem, [aksHost], `https://${aksHost}`);
  const kc = await entraApiAccess({ credential: someToken(), resourceId, armFetch: arm.fetch, now: clock.now });
  arm.server = "https://attacker.example";
  clock.advance(30_000);
  const error = await refusal(() => kc.refreshClusterCredentials());
  assert.instance(error, ApiServerHostError);
  assert.is(kc.server, `https://${aksHost}`);
});

Options("azureCredential: a client ID where the platform serves managed identities gives the managed identity, able to fetch past its cache", () => {
  const appService = azureCredential("11111111-2222-3333-4444-555555555555", { IDENTITY_ENDPOINT: "http://127.0.0.1:41741/msi/token", IDENTITY_HEADER: "x" });
  assert.ok(isRefreshable(appService));
  assert.not.instance(appService, DefaultAzureCredential);
  const workload = azureCredential("11111111-2222-3333-4444-555555555555", { AZURE_FEDERATED_TOKEN_FILE: "/var/run/secrets/azure/tokens/azure-identity-token" });
  assert.ok(isRefreshable(workload));
});

Options("azureCredential: elsewhere, or without a client ID, DefaultAzureCredential", () => {
  assert.instance(azureCredential("11111111-2222-3333-4444-555555555555", {}), DefaultAzureCredential);
  assert.instance(azureCredential(undefined, { IDENTITY_ENDPOINT: "http://127.0.0.1:41741/msi/token" }), DefaultAzureCredential);
  assert.instance(azureCredential(" ", {}), DefaultAzureCredential);
});

Options.run();

// ---------------------------------------------------------------------------------------------
// Against a real kube-apiserver that knows three static bearer tokens, all in one group that
// holds the webhook's ClusterRole. A token the API server does not know stands for an Entra
// token it refuses.

const tokens = {
  a: { token: "entra-token-a-7c1d0e6f2b", user: "entra-a" },
  b: { token: "entra-token-b-94ab13c5d0", user: "entra-b" },
  c: { token: "entra-token-c-05e8f7a2b6", user: "entra-c" },
};
const refusedToken = "entra-token-unknown-5f3e";
const group = "entra-webhooks";

interface ClusterContext {
  controlPlane?: ControlPlane;
  admin: KubeConfig;
}

const Cluster = suite<ClusterContext>("EntraApiAccess against a real API server");

function credSpec(name: string): Manifest {
  return {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    metadata: { name },
    credspec: { CmsPlugins: ["ActiveDirectory"], ActiveDirectoryConfig: { GroupManagedServiceAccounts: [{ Name: name, Scope: "CONTOSO" }] } },
  };
}

Cluster.before(async (context) => {
  try {
    context.controlPlane = await startControlPlane({
      withControllerManager: false,
      tokens: Object.values(tokens).map((t, i) => ({ token: t.token, user: t.user, uid: `entra-${i}`, groups: [group] })),
      log: (line) => process.stderr.write(`  ${line}\n`),
    });
    context.admin = new KubeConfig();
    context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
    await applyObjects(context.admin, [
      credSpecCrd(),
      webhookClusterRole(),
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "entra-webhooks" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: webhookClusterRoleName },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: group }],
      },
      credSpec("webapp1"),
    ]);
  } catch (error) {
    console.error("EntraApiAccess against a real API server: setup failed", error);
    await context.controlPlane?.stop();
    context.controlPlane = undefined;
    throw error;
  }
});

Cluster.after(async (context) => {
  await context.controlPlane?.stop();
});

function cluster(context: ClusterContext): ControlPlane {
  assert.ok(context.controlPlane, "the control plane is running");
  return context.controlPlane;
}

const credSpecsPath = "/apis/windows.k8s.io/v1/gmsacredentialspecs";

/** A connection as the product's ports make one over the access: credentials applied on every call. */
async function over<T>(kc: ApiServerCredentials, use: (connection: ApiServerConnection) => Promise<T>): Promise<T> {
  const connection = apiServerConnection(kc);
  try {
    return await use(connection);
  } finally {
    await connection.close();
  }
}

function answered(reply: ApiReply, what: string): Record<string, unknown> {
  assert.ok(reply.status >= 200 && reply.status < 300, `${what}: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body as Record<string, unknown>;
}

async function whoAmI(connection: ApiServerConnection): Promise<string | undefined> {
  const reply = await connection.send({
    method: "POST",
    path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  const review = answered(reply, "SelfSubjectReview") as { status?: { userInfo?: { username?: string } } };
  return review.status?.userInfo?.username;
}

async function credSpecNames(connection: ApiServerConnection): Promise<string[]> {
  const list = answered(await connection.send({ method: "GET", path: credSpecsPath }), "list") as { items: { metadata?: { name?: string } }[] };
  return list.items.map((item) => item.metadata?.name ?? "").sort();
}

Cluster("requests carry the token; once it expires the credential is asked again and the next token is used", async (context) => {
  const cp = cluster(context);
  // The cache's clock is moved by hand, so "expired" does not depend on how fast this machine is.
  const clock = manualClock(Date.now());
  const credential = fakeCredential(
    [
      { token: tokens.a.token, lifetimeMs: 120_000 },
      { token: tokens.b.token, lifetimeMs: hour },
    ],
    clock.now,
  );
  const kc = await entraApiAccess({ credential, server: cp.server, caPem: cp.caPem, now: clock.now });
  assert.is(credential.calls.length, 1);
  await over(kc, async (connection) => {
    assert.is(await whoAmI(connection), tokens.a.user);
    assert.equal(await credSpecNames(connection), ["webapp1"]);
    assert.is(credential.calls.length, 1, "served from the cache");
    clock.advance(120_000);
    assert.equal(await credSpecNames(connection), ["webapp1"]);
    assert.is(await whoAmI(connection), tokens.b.user, "the same connection sends the renewed token");
  });
  assert.is(credential.calls.length, 2);
  assert.ok(
    credential.calls.every((call) => call.scopes === aksServerScope),
    "every token is for the AKS server application",
  );
});

Cluster("a list and then a watch carry the bearer token", async (context) => {
  const cp = cluster(context);
  const kc = await entraApiAccess({ credential: fakeCredential([{ token: tokens.b.token, lifetimeMs: hour }]), server: cp.server, caPem: cp.caPem });
  await over(kc, async (connection) => {
    const list = answered(await connection.send({ method: "GET", path: credSpecsPath }), "list") as {
      metadata: { resourceVersion: string };
      items: { metadata: { name: string } }[];
    };
    assert.equal(
      list.items.map((item) => item.metadata.name),
      ["webapp1"],
      "listed",
    );
    const stop = new AbortController();
    try {
      const watch = await connection.stream({ path: `${credSpecsPath}?watch=1&resourceVersion=${list.metadata.resourceVersion}`, signal: stop.signal, idleTimeoutMs: 30_000 });
      assert.is(watch.status, 200, JSON.stringify(watch.body));
      await applyObjects(context.admin, [credSpec("added-later")]);
      const seen: string[] = [];
      for await (const line of watch.lines()) {
        const event = JSON.parse(line) as { type: string; object: { metadata: { name: string } } };
        seen.push(`${event.type} ${event.object.metadata.name}`);
        if (event.object.metadata.name === "added-later") break;
      }
      assert.equal(seen, ["ADDED added-later"], "seen through the watch");
    } finally {
      stop.abort();
    }
  });
});

Cluster("a watch with a token the API server refuses gets 401: the watch sends the token", async (context) => {
  const cp = cluster(context);
  const kc = await entraApiAccess({ credential: fakeCredential([{ token: refusedToken, lifetimeMs: hour }]), server: cp.server, caPem: cp.caPem });
  const stop = new AbortController();
  const watch = await over(kc, (connection) => connection.stream({ path: `${credSpecsPath}?watch=1`, signal: stop.signal, idleTimeoutMs: 30_000 }));
  stop.abort();
  assert.is(watch.status, 401);
});

Cluster("a refused token gives 401; after invalidateToken() the next token works", async (context) => {
  const cp = cluster(context);
  const credential = fakeCredential([
    { token: refusedToken, lifetimeMs: hour },
    { token: tokens.c.token, lifetimeMs: hour },
  ]);
  const kc = await entraApiAccess({ credential, server: cp.server, caPem: cp.caPem });
  await over(kc, async (connection) => {
    assert.is((await connection.send({ method: "GET", path: credSpecsPath })).status, 401, "the refused token is refused");
    kc.invalidateToken();
    assert.ok((await credSpecNames(connection)).length >= 1);
    assert.is(await whoAmI(connection), tokens.c.user);
  });
  assert.is(credential.calls.length, 2);
});

// A fake Azure Resource Manager on loopback, serving listClusterUserCredential with a kubeconfig
// that points at the real API server: its URL and CA, and an exec user (no secret) as AKS gives
// for Entra clusters.
interface FakeArm {
  readonly endpoint: string;
  readonly fetch: ArmFetch;
  readonly requests: Array<{ method: string; url: string; authorization: string | undefined }>;
  caPem: string;
  server: string;
  close(): Promise<void>;
}

async function startFakeArm(firstServer: string, caPem: string): Promise<FakeArm> {
  const armCa = await createCertificateAuthority("fake-arm-ca");
  const serving = await issueCertificate(armCa, { commonName: "fake-arm", ipAddresses: ["127.0.0.1"], usage: "server" });
  const requests: FakeArm["requests"] = [];
  const state = { caPem, server: firstServer };
  const httpsServer = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (request, response) => {
    requests.push({ method: request.method ?? "", url: request.url ?? "", authorization: request.headers.authorization });
    if (request.method === "GET") {
      // The cluster resource declares both loopback names the tests use for the API server.
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ properties: { fqdn: "127.0.0.1", privateFQDN: "localhost" } }));
      return;
    }
    const kubeconfig = {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "aks-one", cluster: { server: state.server, "certificate-authority-data": Buffer.from(state.caPem).toString("base64") } }],
      contexts: [{ name: "aks-one", context: { cluster: "aks-one", user: "clusterUser_rg-aks_aks-one" } }],
      "current-context": "aks-one",
      users: [
        {
          name: "clusterUser_rg-aks_aks-one",
          user: { exec: { apiVersion: "client.authentication.k8s.io/v1beta1", command: "kubelogin", args: ["get-token", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"] } },
        },
      ],
    };
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ kubeconfigs: [{ name: "clusterUser", value: Buffer.from(stringify(kubeconfig)).toString("base64") }] }));
  });
  await new Promise<void>((resolve) => httpsServer.listen(0, "127.0.0.1", resolve));
  const endpoint = `https://127.0.0.1:${(httpsServer.address() as AddressInfo).port}`;
  // ARM through node:https, trusting only the fake's CA.
  const armFetch: ArmFetch = (url, init) =>
    new Promise((resolve, reject) => {
      const request = https.request(url, { method: init.method, headers: init.headers, ca: armCa.certPem, signal: init.signal }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve(new Response(Buffer.concat(chunks), { status: response.statusCode ?? 0 })));
        response.on("error", reject);
      });
      request.on("error", reject);
      request.end();
    });
  return {
    endpoint,
    fetch: armFetch,
    requests,
    get caPem() {
      return state.caPem;
    },
    set caPem(value: string) {
      state.caPem = value;
    },
    get server() {
      return state.server;
    },
    set server(value: string) {
      state.server = value;
    },
    close: () => new Promise<void>((resolve) => httpsServer.close(() => resolve())),
  };
}

Cluster("with a resource ID, the URL and CA come from ARM with an ARM token, and the API server gets the AKS token", async (context) => {
  const cp = cluster(context);
  const arm = await startFakeArm(cp.server, cp.caPem);
  try {
    const clock = manualClock(Date.now());
    const credential = fakeCredential([{ token: tokens.b.token, lifetimeMs: hour }], clock.now);
    credential.scripts.set(`${arm.endpoint}/.default`, [{ token: "arm-token", lifetimeMs: hour }]);
    const kc: EntraApiAccess = await entraApiAccess({ credential, resourceId, armEndpoint: arm.endpoint, armFetch: arm.fetch, now: clock.now, loopbackApiServerForTests: true });

    // Both reads go at once; in whatever order they arrive, each carries the ARM token.
    const requests = [...arm.requests].sort((a, b) => a.method.localeCompare(b.method));
    assert.is(requests.length, 2);
    assert.equal(requests[0], {
      method: "GET",
      url: "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one?api-version=2025-10-01",
      authorization: "Bearer arm-token",
    });
    assert.equal(requests[1], {
      method: "POST",
      url: "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one/listClusterUserCredential?api-version=2025-10-01",
      authorization: "Bearer arm-token",
    });
    assert.is(kc.server, cp.server);
    assert.is(kc.resourceId, resourceId);
    await over(kc, async (connection) => {
      assert.ok((await credSpecNames(connection)).includes("webapp1"));
      assert.is(await whoAmI(connection), tokens.b.user);
    });
    assert.equal(
      credential.calls.map((c) => c.scopes),
      [`${arm.endpoint}/.default`, aksServerScope],
    );
  } finally {
    await arm.close();
  }
});

Cluster("refreshClusterCredentials re-reads ARM at most every 30 s, and a new CA applies to the next request", async (context) => {
  const cp = cluster(context);
  const arm = await startFakeArm(cp.server, cp.caPem);
  try {
    const clock = manualClock(Date.now());
    const credential = fakeCredential([{ token: tokens.b.token, lifetimeMs: 24 * hour }], clock.now);
    const kc = await entraApiAccess({ credential, resourceId, armEndpoint: arm.endpoint, armFetch: arm.fetch, now: clock.now, loopbackApiServerForTests: true });
    // One connection throughout, as a running instance keeps one: it must follow every re-read.
    const connection = apiServerConnection(kc);
    const list = () => credSpecNames(connection);

    assert.ok((await list()).includes("webapp1"), "a pool is open with the first CA");
    const tooSoon = await kc.refreshClusterCredentials();
    assert.is(tooSoon.outcome, "skipped");
    // Every read is two requests: the cluster resource, then listClusterUserCredential.
    assert.is(arm.requests.length, 2);

    clock.advance(30_000);
    assert.equal(await kc.refreshClusterCredentials(), { outcome: "unchanged" });
    assert.is(arm.requests.length, 4);

    // ARM now hands out a CA that did not sign the API server's certificate.
    arm.caPem = (await createCertificateAuthority("not-the-cluster-ca")).certPem;
    clock.advance(30_000);
    const [first, second] = await Promise.all([kc.refreshClusterCredentials(), kc.refreshClusterCredentials()]);
    assert.equal(first, { outcome: "updated", serverChanged: false, caChanged: true });
    assert.equal(second, first, "concurrent calls share one read");
    assert.is(arm.requests.length, 6);
    try {
      await list();
      assert.unreachable("the wrong CA should have been used and failed");
    } catch (error) {
      assert.instance(error, ApiServerConnectionError, "TLS failed before any HTTP answer");
      assert.match((error as ApiServerConnectionError).detail, "unable to verify the first certificate");
    }

    // The rotation bundle: the unknown CA and the real one.
    arm.caPem = `${arm.caPem}${cp.caPem}`;
    clock.advance(30_000);
    assert.equal(await kc.refreshClusterCredentials(), { outcome: "updated", serverChanged: false, caChanged: true });
    await list();

    // The same API server under another name its certificate carries.
    arm.server = cp.server.replace("127.0.0.1", "localhost");
    clock.advance(30_000);
    assert.equal(await kc.refreshClusterCredentials(), { outcome: "updated", serverChanged: true, caChanged: false });
    assert.is(kc.server, arm.server);
    assert.is(await whoAmI(connection), tokens.b.user, "the connection follows the new URL");
    await list();
    assert.is(credential.calls.filter((c) => c.scopes === aksServerScope).length, 1, "one AKS token throughout");
    await connection.close();
  } finally {
    await arm.close();
  }
});

Cluster("the product's ports renew a refused token once and answer", async (context) => {
  const cp = cluster(context);
  const hour = 3_600_000;
  const credential = fakeCredential([
    { token: refusedToken, lifetimeMs: hour },
    { token: tokens.c.token, lifetimeMs: hour },
  ]);
  const kc = await entraApiAccess({ credential, server: cp.server, caPem: cp.caPem });
  const settings = readAdmissionSettings({ GMSA_API_SERVER_URL: cp.server, GMSA_CREDSPEC_CACHE: "false", GMSA_AUTH_CACHE_TTL_SECONDS: "0" });
  const ports = portsFor(kc, settings, () => {});
  const lookup = await ports.credSpecs.lookup("webapp1", { signal: new AbortController().signal });
  assert.is(lookup.kind, "found");
  assert.is(credential.calls.filter((c) => String(c.scopes).includes(aksServerScope)).length, 2, "one refused token, one renewed");
  await ports.stop();
});

Cluster.run();
