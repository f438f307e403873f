import { createServer as createPlainServer, type IncomingMessage, type Server as PlainServer, type ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { createCertificateAuthority, issueCertificate } from "../../controlplane/pki.js";
import type { AddressInfo } from "node:net";
import { mkdtempSync } from "node:fs";
import { writeKubeconfig } from "./kubeconfigs.js";
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
  /** Only requests whose path matches fail (default: every request). */
  failPath?: RegExp;
  /** Sent with a failure, in seconds. */
  retryAfter?: number;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Only requests whose path and query match wait (default: every request). */
  delayPath?: RegExp;
  /** The bearer tokens it accepts; any other is answered 401, as an API server does. Default: any. */
  acceptTokens?: Set<string>;
}

export interface FakeApiCall {
  readonly method: string;
  readonly path: string;
  /** The query string as sent, without its `?` ("" when there is none): a list and a watch share their path. */
  readonly search: string;
  readonly body?: unknown;
  readonly authorization?: string;
}

export interface FakeApiServer {
  readonly url: string;
  readonly kubeconfig: string;
  /** The CA that signed its serving certificate. */
  readonly caPem: string;
  readonly state: FakeApiState;
  readonly calls: FakeApiCall[];
  /** Connections opened to it: TLS handshakes completed (or TCP connections, for plain HTTP). */
  readonly connections: { count: number };
  /** Requests being answered now, and the most at once. */
  readonly load: { now: number; most: number };
  /** Ends every open watch, as an API server restarting does. */
  breakWatches(): void;
  /** Stores a credential spec and tells every open watch (ADDED). */
  addCredSpec(name: string, object: Record<string, unknown>): void;
  /** Watches open now. */
  readonly openWatches: number;
  close(): Promise<void>;
}

export interface FakeApiServerOptions {
  /** Serve plain HTTP, as kubectl proxy does. */
  readonly plainHttp?: boolean;
  /** The server written into the kubeconfig, when it is not the fake's own URL. */
  readonly kubeconfigServer?: string;
}

export async function startFakeApiServer(options: FakeApiServerOptions = {}): Promise<FakeApiServer> {
  const state: FakeApiState = { credSpecs: new Map(), grants: new Set() };
  const calls: FakeApiCall[] = [];
  const connections = { count: 0 };
  const load = { now: 0, most: 0 };
  const watchers = new Set<ServerResponse>();
  let resourceVersion = 1;
  const ca = await createCertificateAuthority("fake API server CA");
  const serving = await issueCertificate(ca, { commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"], usage: "server" });
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    load.now += 1;
    load.most = Math.max(load.most, load.now);
    res.on("close", () => (load.now -= 1));
    void answer(req, res, { state, calls, watchers, resourceVersion: () => resourceVersion });
  };
  const server: Server | PlainServer = options.plainHttp ? createPlainServer(handler) : createServer({ cert: serving.certPem, key: serving.keyPem }, handler);
  server.on(options.plainHttp ? "connection" : "secureConnection", () => (connections.count += 1));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `${options.plainHttp ? "http" : "https"}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = mkdtempSync(join(tmpdir(), "gmsa-fake-api-"));
  const kubeconfig = join(dir, "kubeconfig");
  writeKubeconfig(kubeconfig, { server: options.kubeconfigServer ?? url, ...(options.plainHttp ? {} : { caPem: ca.certPem }), token: "fake-token", clusterName: "fake" });
  return {
    url,
    kubeconfig,
    caPem: ca.certPem,
    state,
    calls,
    connections,
    load,
    get openWatches() {
      return watchers.size;
    },
    breakWatches() {
      for (const watcher of watchers) watcher.destroy();
    },
    addCredSpec(name, object) {
      resourceVersion += 1;
      const stored = { ...object, metadata: { name, resourceVersion: String(resourceVersion) } };
      state.credSpecs.set(name, stored);
      for (const watcher of watchers) watcher.write(`${JSON.stringify({ type: "ADDED", object: stored })}\n`);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Served {
  readonly state: FakeApiState;
  readonly calls: FakeApiCall[];
  readonly watchers: Set<ServerResponse>;
  readonly resourceVersion: () => number;
}

async function answer(req: IncomingMessage, res: ServerResponse, { state, calls, watchers, resourceVersion }: Served): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString();
  const body: unknown = text ? JSON.parse(text) : undefined;
  const url = new URL(req.url ?? "/", "http://x");
  const path = url.pathname;
  calls.push({ method: req.method ?? "GET", path, search: url.search.slice(1), body, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
  if (state.delayMs && (!state.delayPath || state.delayPath.test(req.url ?? ""))) await new Promise((resolve) => setTimeout(resolve, state.delayMs));
  if (res.destroyed) return;
  if (state.acceptTokens && !state.acceptTokens.has((req.headers.authorization ?? "").replace(/^Bearer /, ""))) {
    return send(res, 401, status(401, "Unauthorized", "Unauthorized"));
  }
  if (state.failWith && (state.failTimes === undefined || state.failTimes > 0) && (!state.failPath || state.failPath.test(path))) {
    if (state.failTimes !== undefined) state.failTimes -= 1;
    if (state.retryAfter !== undefined) res.setHeader("retry-after", String(state.retryAfter));
    return send(res, state.failWith, status(state.failWith, "injected failure"));
  }

  if (req.method === "GET" && path === "/apis/windows.k8s.io/v1/gmsacredentialspecs") {
    if (url.searchParams.get("watch") !== "true") {
      // Pages as the API server does with `limit`: the continue token here is just the offset.
      const all = [...state.credSpecs].map(([name, object]) => stored(name, object));
      const limit = Number(url.searchParams.get("limit") ?? "0");
      const from = Number(url.searchParams.get("continue") ?? "0");
      const items = limit > 0 ? all.slice(from, from + limit) : all;
      const more = limit > 0 && from + limit < all.length ? { continue: String(from + limit) } : {};
      return send(res, 200, { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpecList", metadata: { resourceVersion: String(resourceVersion()), ...more }, items });
    }
    // A watch stays open; events are written by addCredSpec.
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
    watchers.add(res);
    res.on("close", () => watchers.delete(res));
    return;
  }
  const credSpec = path.match(/^\/apis\/windows\.k8s\.io\/v1\/gmsacredentialspecs\/([^/]+)$/);
  if (req.method === "GET" && credSpec) {
    const name = decodeURIComponent(credSpec[1]!);
    const object = state.credSpecs.get(name);
    return object ? send(res, 200, stored(name, object)) : send(res, 404, status(404, `gmsacredentialspecs.windows.k8s.io "${name}" not found`, "NotFound"));
  }
  const review = path.match(/^\/apis\/authorization\.k8s\.io\/v1\/(?:namespaces\/[^/]+\/localsubjectaccessreviews|subjectaccessreviews)$/);
  if (req.method === "POST" && review) {
    const spec = (body as { spec: { user: string; resourceAttributes: { name: string } } }).spec;
    const allowed = state.grants.has(`${spec.user}|${spec.resourceAttributes.name}`);
    return send(res, 201, { ...(body as object), status: { allowed } });
  }
  send(res, 404, status(404, `no fake for ${req.method} ${path}`, "NotFound"));
}

/** A spec as the API server returns it: named by the name it is stored under, whatever the object said. */
function stored(name: string, object: Record<string, unknown>): Record<string, unknown> {
  const metadata = typeof object.metadata === "object" && object.metadata !== null ? object.metadata : {};
  return { ...object, metadata: { ...metadata, name } };
}

function status(code: number, message: string, reason = "InternalError") {
  return { kind: "Status", apiVersion: "v1", status: "Failure", code, message, reason };
}

function send(res: ServerResponse, code: number, value: unknown): void {
  res.writeHead(code, { "content-type": "application/json" });
  res.end(JSON.stringify(value));
}
