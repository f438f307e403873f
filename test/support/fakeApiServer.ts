import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { createCertificateAuthority, issueCertificate } from "../../controlplane/pki.js";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A small stand-in for the two API server endpoints the webhook uses (credential spec GET and
 * access reviews), over real HTTPS, so tests exercise the real @kubernetes/client-node. Defaults
 * to the happy path; tests change `state` to grant, refuse, delay or fail.
 */
export interface FakeApiState {
  credSpecs: Map<string, Record<string, unknown>>;
  /** `${user}|${credSpecName}` pairs that may `use`. */
  grants: Set<string>;
  /** Answer requests with this status instead (every one, or the next `failTimes`). */
  failWith?: number;
  failTimes?: number;
  /** Sent with a failure, in seconds. */
  retryAfter?: number;
  /** Wait this long before answering. */
  delayMs?: number;
}

export interface FakeApiCall {
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
}

export interface FakeApiServer {
  readonly url: string;
  readonly kubeconfig: string;
  readonly state: FakeApiState;
  readonly calls: FakeApiCall[];
  close(): Promise<void>;
}

export async function startFakeApiServer(): Promise<FakeApiServer> {
  const state: FakeApiState = { credSpecs: new Map(), grants: new Set() };
  const calls: FakeApiCall[] = [];
  const ca = await createCertificateAuthority("fake API server CA");
  const serving = await issueCertificate(ca, { commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"], usage: "server" });
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    void answer(req, res, state, calls);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = mkdtempSync(join(tmpdir(), "gmsa-fake-api-"));
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster: { server: url, "certificate-authority-data": Buffer.from(ca.certPem).toString("base64") } }],
      users: [{ name: "webhook", user: { token: "fake-token" } }],
      contexts: [{ name: "fake", context: { cluster: "fake", user: "webhook" } }],
      "current-context": "fake",
    }),
  );
  return {
    url,
    kubeconfig,
    state,
    calls,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

async function answer(req: IncomingMessage, res: ServerResponse, state: FakeApiState, calls: FakeApiCall[]): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  const body: unknown = text ? JSON.parse(text) : undefined;
  const path = new URL(req.url ?? "/", "http://x").pathname;
  calls.push({ method: req.method ?? "GET", path, body });
  if (state.delayMs) await new Promise((resolve) => setTimeout(resolve, state.delayMs));
  if (res.destroyed) return;
  if (state.failWith && (state.failTimes === undefined || state.failTimes > 0)) {
    if (state.failTimes !== undefined) state.failTimes -= 1;
    if (state.retryAfter !== undefined) res.setHeader("retry-after", String(state.retryAfter));
    return send(res, state.failWith, status(state.failWith, "injected failure"));
  }

  const credSpec = path.match(/^\/apis\/windows\.k8s\.io\/v1\/gmsacredentialspecs\/([^/]+)$/);
  if (req.method === "GET" && credSpec) {
    const name = decodeURIComponent(credSpec[1]!);
    const object = state.credSpecs.get(name);
    return object ? send(res, 200, object) : send(res, 404, status(404, `gmsacredentialspecs.windows.k8s.io "${name}" not found`, "NotFound"));
  }
  const review = path.match(/^\/apis\/authorization\.k8s\.io\/v1\/(?:namespaces\/[^/]+\/localsubjectaccessreviews|subjectaccessreviews)$/);
  if (req.method === "POST" && review) {
    const spec = (body as { spec: { user: string; resourceAttributes: { name: string } } }).spec;
    const allowed = state.grants.has(`${spec.user}|${spec.resourceAttributes.name}`);
    return send(res, 201, { ...(body as object), status: { allowed } });
  }
  send(res, 404, status(404, `no fake for ${req.method} ${path}`, "NotFound"));
}

function status(code: number, message: string, reason = "InternalError") {
  return { kind: "Status", apiVersion: "v1", status: "Failure", code, message, reason };
}

function send(res: ServerResponse, code: number, value: unknown): void {
  res.writeHead(code, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}
