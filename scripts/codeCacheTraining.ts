import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { createCertificateAuthority, issueCertificate } from "../controlplane/pki.js";

/**
 * What `npm run package` runs the bundle against before it keeps V8's code cache: a stand-in for
 * a cluster's API server that allows every `use` and holds one credential spec, so that one mutate
 * admission runs from start to patch and the cache holds what a new instance's first admission
 * compiles (the managed identity's token, the connection to the API server, the review's decoding and policy), not
 * only what loading the bundle does. It speaks HTTP/2 as the API server does (and HTTP/1.1), over
 * TLS with a throwaway CA; nothing of it goes into the package but the compiled code.
 */
export interface TrainingCluster {
  /**
   * The app's settings for the stand-in: Microsoft Entra access with a managed identity, as a
   * Function App in Azure reaches its cluster, the token from a stand-in for the platform's
   * identity endpoint. So the cache holds what production's first admission compiles (the token
   * fetch included), not the kubeconfig path a Function App does not take.
   */
  readonly settings: Readonly<Record<string, string>>;
  /** A file holding a mutate AdmissionReview of a pod naming the stand-in's credential spec. */
  readonly mutateReviewFile: string;
  close(): Promise<void>;
}

const credSpecPath = "/apis/windows.k8s.io/v1/gmsacredentialspecs";

export async function startTrainingCluster(examplePath: string): Promise<TrainingCluster> {
  const example = parse(readFileSync(examplePath, "utf8")) as { metadata: { name: string } };
  const name = example.metadata.name;
  const ca = await createCertificateAuthority("gmsa-admission code cache training CA");
  const serving = await issueCertificate(ca, { commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], usage: "server", validityDays: 1 });
  const watches = new Set<Http2ServerResponse>();
  const server = createSecureServer({ cert: serving.certPem, key: serving.keyPem, allowHTTP1: true }, (req, res) => {
    // A request cut off (the training process exits with its watch open) is no failure here.
    answer(req, res).catch(() => res.stream?.close());
  });

  async function answer(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const url = new URL(req.url, "https://localhost");
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method === "POST" && url.pathname.endsWith("subjectaccessreviews")) {
      const review = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      return reply(201, { ...review, status: { allowed: true, reason: "the code cache training allows every use" } });
    }
    if (req.method === "GET" && url.pathname === `${credSpecPath}/${name}`) return reply(200, example);
    if (req.method === "GET" && url.pathname === credSpecPath && url.searchParams.get("watch") === "true") {
      // Held open until the stand-in closes: the cache's watch, as a quiet cluster has it.
      res.writeHead(200, { "content-type": "application/json" });
      watches.add(res);
      return;
    }
    if (req.method === "GET" && url.pathname === credSpecPath) {
      return reply(200, { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpecList", metadata: { resourceVersion: "1" }, items: [example] });
    }
    return reply(404, { apiVersion: "v1", kind: "Status", status: "Failure", reason: "NotFound", code: 404 });
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  // The App Service identity endpoint, as the Functions platform provides it: a token for whoever sends the header.
  const identityHeader = randomUUID();
  const identity = createServer((req, res) => {
    if (req.headers["x-identity-header"] !== identityHeader) return void res.writeHead(401).end();
    const resource = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("resource");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ access_token: "training", expires_on: String(Math.floor(Date.now() / 1000) + 3600), resource, token_type: "Bearer" }));
  });
  await new Promise<void>((resolve, reject) => {
    identity.once("error", reject);
    identity.listen(0, "127.0.0.1", () => resolve());
  });
  const dir = mkdtempSync(join(tmpdir(), "gmsa-cache-training-"));
  const close = async () => {
    for (const watch of watches) watch.end();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await new Promise<void>((resolve) => identity.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const settings = {
      GMSA_CLUSTER_ACCESS: "entra",
      GMSA_API_SERVER_URL: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
      GMSA_API_SERVER_CA: ca.certPem,
      AZURE_CLIENT_ID: "00000000-0000-4000-8000-0000000c0dec",
      IDENTITY_ENDPOINT: `http://127.0.0.1:${(identity.address() as AddressInfo).port}/msi/token`,
      IDENTITY_HEADER: identityHeader,
    };
    return { settings, mutateReviewFile: writeReview(dir, name), close };
  } catch (error) {
    await close();
    throw error;
  }
}

function writeReview(dir: string, name: string): string {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "training-0", namespace: "apps" },
    spec: { containers: [{ name: "app", image: "mcr.microsoft.com/windows/servercore/iis", securityContext: { windowsOptions: { gmsaCredentialSpecName: name } } }] },
  };
  const file = join(dir, "mutate-review.json");
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: {
        uid: randomUUID(),
        kind: { group: "", version: "v1", kind: "Pod" },
        resource: { group: "", version: "v1", resource: "pods" },
        requestKind: { group: "", version: "v1", kind: "Pod" },
        name: pod.metadata.name,
        namespace: pod.metadata.namespace,
        operation: "CREATE",
        userInfo: { username: "training", groups: ["system:authenticated"] },
        object: pod,
        dryRun: false,
      },
    }),
  );
  return file;
}
