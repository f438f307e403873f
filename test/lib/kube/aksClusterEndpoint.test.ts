import { suite } from "uvu";
import * as assert from "uvu/assert";
import { stringify } from "yaml";
import { createCertificateAuthority } from "../../../controlplane/pki.js";
import {
  ArmRequestError,
  armScope,
  endpointFromCredentialResults,
  fetchAksEndpoint,
  fetchManagedClusterHostNames,
  readManagedCluster,
  type ArmFetch,
} from "../../../lib/kube/aksClusterEndpoint.js";
import { parseAksResourceId } from "../../../lib/kube/aksResourceId.js";
import { fakeCredential } from "../../support/fakeCredential.js";

const resourceId = parseAksResourceId("/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one");
const server = "https://aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io:443";
const what = "listClusterUserCredential for aks-one";
/** Stands for anything secret a kubeconfig's users half may hold: it must never reach a message. */
const secret = "s3cr3t-user-token";

let caPem = "";

function kubeconfig(cluster: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "aks-one", cluster }],
    contexts: [{ name: "aks-one", context: { cluster: "aks-one", user: "clusterUser_rg-aks_aks-one" } }],
    "current-context": "aks-one",
    users: [{ name: "clusterUser_rg-aks_aks-one", user: { token: secret } }],
    ...extra,
  };
}

function credentialResults(document: unknown): { kubeconfigs: Array<{ name: string; value: string }> } {
  const text = typeof document === "string" ? document : stringify(document);
  return { kubeconfigs: [{ name: "clusterUser", value: Buffer.from(text).toString("base64") }] };
}

const Decode = suite("listClusterUserCredential answer");

Decode.before(async () => {
  try {
    caPem = (await createCertificateAuthority("aks-one-ca")).certPem;
  } catch (error) {
    console.error("listClusterUserCredential answer: setup failed", error);
    throw error;
  }
});

Decode("gives the current context's cluster: its https URL and its CA as PEM", () => {
  const other = { name: "other", cluster: { server: "https://other.example", "certificate-authority-data": "x" } };
  const document = kubeconfig({ server, "certificate-authority-data": Buffer.from(caPem).toString("base64") });
  document.clusters = [other, ...(document.clusters as unknown[])];
  const endpoint = endpointFromCredentialResults(credentialResults(document), what);
  assert.is(endpoint.server, "https://aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io");
  assert.is(endpoint.caPem?.trim(), caPem.trim());
});

Decode("without a current context, the first cluster", () => {
  const document = kubeconfig({ server, "certificate-authority-data": Buffer.from(caPem).toString("base64") }, { "current-context": undefined, contexts: undefined });
  assert.is(endpointFromCredentialResults(credentialResults(document), what).server, "https://aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io");
});

const broken: Array<[string, () => unknown, RegExp]> = [
  ["a body without kubeconfigs", () => ({ value: [] }), /has no valid kubeconfigs/],
  ["an empty list", () => ({ kubeconfigs: [] }), /holds no kubeconfig/],
  ["a value that is not base64", () => ({ kubeconfigs: [{ name: "x", value: `{"token":"${secret}"}` }] }), /is not base64/],
  ["a value that is not YAML", () => credentialResults(`clusters: [\nusers: {token: ${secret}`), /is not YAML/],
  ["a kubeconfig without clusters", () => credentialResults({ users: [{ name: "u", user: { token: secret } }] }), /has no valid clusters$/],
  ["a cluster without a server", () => credentialResults(kubeconfig({ "certificate-authority-data": "eA==" })), /has no valid clusters\.cluster\.server/],
  ["a server that is a number", () => credentialResults(kubeconfig({ server: 443 })), /has no valid clusters\.cluster\.server/],
  [
    "an http server",
    () => credentialResults(kubeconfig({ server: "http://aks.example", "certificate-authority-data": Buffer.from(caPem).toString("base64") })),
    /must be https, not http/,
  ],
  ["no CA", () => credentialResults(kubeconfig({ server })), /has no clusters\[\]\.cluster\.certificate-authority-data/],
  [
    "a CA that is not a certificate",
    () => credentialResults(kubeconfig({ server, "certificate-authority-data": Buffer.from("hello").toString("base64") })),
    /neither PEM nor base64 of PEM/,
  ],
];

for (const [case_, body, message] of broken) {
  Decode(`${case_}: a clear error that quotes nothing from the kubeconfig`, () => {
    try {
      endpointFromCredentialResults(body(), what);
      assert.unreachable("should have failed");
    } catch (error) {
      assert.instance(error, Error);
      const text = (error as Error).message;
      assert.match(text, message);
      assert.match(text, what);
      assert.not.match(text, secret);
    }
  });
}

Decode.run();

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
}

function scriptedArm(answers: Array<{ status: number; body: unknown } | Error>): { fetch: ArmFetch; sent: Sent[] } {
  const sent: Sent[] = [];
  return {
    sent,
    fetch: async (url, init) => {
      sent.push({ url, method: init.method, headers: init.headers });
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      if (answer instanceof Error) throw answer;
      return new Response(typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body), { status: answer.status });
    },
  };
}

const Call = suite("listClusterUserCredential call");

function goodAnswer() {
  return { status: 200, body: credentialResults(kubeconfig({ server, "certificate-authority-data": Buffer.from(caPem).toString("base64") })) };
}

Call.before(async () => {
  try {
    if (!caPem) caPem = (await createCertificateAuthority("aks-one-ca")).certPem;
  } catch (error) {
    console.error("listClusterUserCredential call: setup failed", error);
    throw error;
  }
});

Call("POSTs to the cluster's listClusterUserCredential with an ARM-scoped token", async () => {
  const arm = scriptedArm([goodAnswer()]);
  const credential = fakeCredential([{ token: "arm-token", lifetimeMs: 3_600_000 }]);
  const endpoint = await fetchAksEndpoint({ resourceId, credential, armEndpoint: "https://management.azure.com/", fetch: arm.fetch });
  assert.is(endpoint.server, "https://aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io");
  assert.equal(
    credential.calls.map((c) => c.scopes),
    ["https://management.azure.com/.default"],
  );
  assert.is(arm.sent.length, 1);
  assert.is(arm.sent[0]!.method, "POST");
  assert.is(
    arm.sent[0]!.url,
    "https://management.azure.com/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one/listClusterUserCredential?api-version=2025-10-01",
  );
  assert.is(arm.sent[0]!.headers.Authorization, "Bearer arm-token");
});

Call("a sovereign cloud's ARM endpoint names its own token scope", () => {
  assert.is(armScope("https://management.usgovcloudapi.net"), "https://management.usgovcloudapi.net/.default");
  assert.throws(() => armScope("http://management.azure.com"), /must be https/);
  assert.throws(() => armScope("https://management.azure.com/subscriptions"), /must be an origin/);
});

Call("an ARM refusal names the status and ARM's own code and message, and is not retried", async () => {
  const arm = scriptedArm([
    {
      status: 403,
      body: {
        error: {
          code: "AuthorizationFailed",
          message: "The client 'abc' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.\nmore",
        },
      },
    },
  ]);
  try {
    await fetchAksEndpoint({
      resourceId,
      credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]),
      armEndpoint: "https://management.azure.com",
      fetch: arm.fetch,
      retryDelayMs: 1,
    });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, ArmRequestError);
    const failure = error as ArmRequestError;
    assert.is(failure.httpStatus, 403);
    assert.match(failure.message, "Azure Resource Manager answered 403 to listClusterUserCredential for /subscriptions/");
    assert.match(failure.message, "(AuthorizationFailed: The client 'abc' does not have authorization");
    assert.not.match(failure.message, "more");
  }
  assert.is(arm.sent.length, 1);
});

Call("a 404 says so plainly", async () => {
  const arm = scriptedArm([{ status: 404, body: { error: { code: "ResourceNotFound" } } }]);
  try {
    await fetchAksEndpoint({ resourceId, credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]), armEndpoint: "https://management.azure.com", fetch: arm.fetch });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.match((error as Error).message, /answered 404 .* \(ResourceNotFound\)$/);
  }
});

Call("5xx, 429 and no answer at all are tried again, three times in all", async () => {
  const arm = scriptedArm([{ status: 503, body: "" }, new TypeError("fetch failed"), goodAnswer()]);
  const endpoint = await fetchAksEndpoint({
    resourceId,
    credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]),
    armEndpoint: "https://management.azure.com",
    fetch: arm.fetch,
    retryDelayMs: 1,
  });
  assert.is(endpoint.server, "https://aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io");
  assert.is(arm.sent.length, 3);

  const failing = scriptedArm([{ status: 429, body: "" }]);
  try {
    await fetchAksEndpoint({
      resourceId,
      credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]),
      armEndpoint: "https://management.azure.com",
      fetch: failing.fetch,
      retryDelayMs: 1,
    });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.is((error as ArmRequestError).httpStatus, 429);
  }
  assert.is(failing.sent.length, 3);
});

Call("a 200 whose body is not JSON is an error", async () => {
  const arm = scriptedArm([{ status: 200, body: "<html>proxy login</html>" }]);
  try {
    await fetchAksEndpoint({ resourceId, credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]), armEndpoint: "https://management.azure.com", fetch: arm.fetch });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.match((error as Error).message, "with a body that is not JSON");
  }
});

Call("no ARM token, no call: the error names the ARM scope and the credential's words", async () => {
  const arm = scriptedArm([goodAnswer()]);
  try {
    await fetchAksEndpoint({
      resourceId,
      credential: fakeCredential([{ fail: "DefaultAzureCredential: no credential in the chain worked" }]),
      armEndpoint: "https://management.azure.com",
      fetch: arm.fetch,
    });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.match(
      (error as Error).message,
      "could not get a Microsoft Entra token for Azure Resource Manager (scope https://management.azure.com/.default): DefaultAzureCredential",
    );
  }
  assert.is(arm.sent.length, 0);
});

Call("the managed cluster's own host names come from a GET of the cluster resource, lower case", async () => {
  const arm = scriptedArm([
    {
      status: 200,
      body: {
        id: resourceId.id,
        properties: {
          fqdn: "AKS-one-dns-1a2b3c.hcp.westeurope.azmk8s.io",
          privateFQDN: "aks-one.privatelink.westeurope.azmk8s.io.",
          azurePortalFQDN: "",
          kubernetesVersion: "1.33",
        },
      },
    },
  ]);
  const names = await fetchManagedClusterHostNames({
    resourceId,
    credential: fakeCredential([{ token: "arm-token", lifetimeMs: 60_000 }]),
    armEndpoint: "https://management.azure.com",
    fetch: arm.fetch,
  });
  assert.equal(names, ["aks-one-dns-1a2b3c.hcp.westeurope.azmk8s.io", "aks-one.privatelink.westeurope.azmk8s.io"]);
  assert.is(arm.sent[0]!.method, "GET");
  assert.is(
    arm.sent[0]!.url,
    "https://management.azure.com/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one?api-version=2025-10-01",
  );
});

Call("a cluster resource that declares no host name is an error", async () => {
  const arm = scriptedArm([{ status: 200, body: { properties: { kubernetesVersion: "1.33" } } }]);
  try {
    await fetchManagedClusterHostNames({
      resourceId,
      credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]),
      armEndpoint: "https://management.azure.com",
      fetch: arm.fetch,
    });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, ArmRequestError);
    assert.match((error as Error).message, "declares no API server host name");
  }
});

/** Fails the test instead of waiting forever on a promise that never settles. */
async function settlesWithin<T>(ms: number, pending: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([pending, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

Call("a credential that hangs and ignores its signal: the ARM call gives up at its timeout", async () => {
  const arm = scriptedArm([goodAnswer()]);
  const started = Date.now();
  try {
    await settlesWithin(
      3000,
      fetchAksEndpoint({ resourceId, credential: fakeCredential([{ hang: true }]), armEndpoint: "https://management.azure.com", fetch: arm.fetch, timeoutMs: 100 }),
    );
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, ArmRequestError, String(error));
    assert.match((error as Error).message, "did not answer within 100 ms");
  }
  assert.ok(Date.now() - started < 1000);
  assert.is(arm.sent.length, 0);
});

Call("an ARM answer that never comes, from a fetch that ignores its signal: tried three times, then an error", async () => {
  const sent: string[] = [];
  const deaf: ArmFetch = (url) => {
    sent.push(url);
    return new Promise<never>(() => undefined);
  };
  try {
    await settlesWithin(
      3000,
      fetchAksEndpoint({
        resourceId,
        credential: fakeCredential([{ token: "t", lifetimeMs: 60_000 }]),
        armEndpoint: "https://management.azure.com",
        fetch: deaf,
        timeoutMs: 100,
        retryDelayMs: 1,
      }),
    );
    assert.unreachable("should have failed");
  } catch (error) {
    assert.instance(error, ArmRequestError, String(error));
    assert.match((error as Error).message, "did not answer listClusterUserCredential");
  }
  assert.is(sent.length, 3);
});

Call("read together, a read that fails ends the other's attempts: no retry follows the failure", async () => {
  const sent: string[] = [];
  // The cluster resource is refused for good; listClusterUserCredential answers 503, which is retried.
  const fetch: ArmFetch = async (_url, init) => {
    sent.push(init.method);
    if (init.method === "GET") {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return new Response(JSON.stringify({ error: { code: "AuthorizationFailed", message: "no" } }), { status: 403 });
    }
    return new Response("busy", { status: 503 });
  };
  const credential = fakeCredential([{ token: "arm-token", lifetimeMs: 3_600_000 }]);
  const error = await readManagedCluster({ resourceId, credential, armEndpoint: "https://management.azure.com", fetch, retryDelayMs: 50, attempts: 5 }).then(
    () => undefined,
    (failure: unknown) => failure,
  );
  assert.instance(error, ArmRequestError);
  assert.match((error as Error).message, /answered 403/);
  const atFailure = sent.filter((m) => m === "POST").length;
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.is(sent.filter((m) => m === "POST").length, atFailure, "no POST was sent after the read failed");
  assert.ok(atFailure < 5, `${atFailure} POSTs`);
  // One ARM token for both reads.
  assert.is(credential.calls.length, 1);
});

Call.run();
