import { KubeConfig } from "@kubernetes/client-node";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { apiServerConnection, ApiServerConnectionError } from "../../../lib/kube/apiServerConnection.js";
import { kubeConfigFor } from "../../support/kubeconfigs.js";

/**
 * The connection the wiring's object calls go through: bodies travel as the caller's JSON, with the
 * kubeconfig's credentials, and a server that does not answer fails the call within its timeout.
 */
function connectionConfig(server: string, skipTLSVerify = false): KubeConfig {
  return kubeConfigFor({ server, skipTLSVerify, token: "t0ken" });
}

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

async function listen(
  answer: (seen: Seen) => { status: number; body?: string; headers?: Record<string, string> } | undefined,
): Promise<{ server: Server; url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const request = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString() };
      seen.push(request);
      const reply = answer(request);
      if (reply === undefined) return; // hang
      res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      res.end(reply.body ?? "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const Connection = suite("the API server connection for wire JSON");

Connection("sends the body exactly as the caller's JSON, every wire name kept, with the kubeconfig's token", async () => {
  const { server, url, seen } = await listen(() => ({
    status: 200,
    body: '{"kind":"NetworkPolicy","spec":{"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}}',
    headers: { warning: '299 - "deprecated thing"' },
  }));
  // Plain HTTP to this machine carries the token only when the kubeconfig says so, as client-node does.
  const connection = apiServerConnection(connectionConfig(url, true));
  try {
    const policy = { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", spec: { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }], ports: [{ port: "https" }] }] } };
    const crd = { spec: { schema: { "x-kubernetes-preserve-unknown-fields": true } } };
    for (const body of [policy, crd]) {
      const reply = await connection.send({ method: "PATCH", path: "/apis/x/v1/things/a?fieldManager=m", body, contentType: "application/apply-patch+yaml" });
      assert.is(reply.status, 200);
      assert.equal(reply.warnings, ["deprecated thing"]);
      assert.equal((reply.body as { spec: unknown }).spec, { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }] }] }, "read back as sent, `from` included");
    }
    assert.is(
      seen[0]!.body,
      JSON.stringify({
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        spec: { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" } }], ports: [{ port: "https" }] }] },
      }),
    );
    assert.is(seen[1]!.body, '{"spec":{"schema":{"x-kubernetes-preserve-unknown-fields":true}}}');
    assert.is(seen[0]!.method, "PATCH");
    assert.is(seen[0]!.url, "/apis/x/v1/things/a?fieldManager=m");
    assert.is(seen[0]!.headers["content-type"], "application/apply-patch+yaml");
    assert.is(seen[0]!.headers.authorization, "Bearer t0ken");
  } finally {
    await connection.close();
    server.close();
  }
});

Connection("keeps the server URL's path prefix; to kubectl proxy on this machine it sends no token", async () => {
  const { server, url, seen } = await listen(() => ({ status: 200, body: "{}" }));
  const connection = apiServerConnection(connectionConfig(`${url}/k8s/clusters/c-1/`));
  try {
    await connection.send({ method: "GET", path: "/api/v1/namespaces/a" });
    assert.is(seen[0]!.url, "/k8s/clusters/c-1/api/v1/namespaces/a");
    assert.is(seen[0]!.headers.authorization, undefined);
  } finally {
    await connection.close();
    server.close();
  }
});

Connection("a server that does not answer fails the call within its timeout, naming the call", async () => {
  const { server, url } = await listen(() => undefined);
  const connection = apiServerConnection(connectionConfig(url), { timeoutMs: 300 });
  const started = Date.now();
  try {
    await connection.send({ method: "GET", path: "/api/v1/namespaces/a" });
    assert.unreachable("answered");
  } catch (error) {
    assert.instance(error, ApiServerConnectionError);
    assert.match((error as Error).message, /GET \/api\/v1\/namespaces\/a at http:\/\/127\.0\.0\.1:\d+: no answer/);
    assert.ok(Date.now() - started < 3000, `gave up after ${Date.now() - started} ms`);
  } finally {
    await connection.close();
    server.closeAllConnections();
    server.close();
  }
});

Connection("plain HTTP to another host is refused before anything is sent; a kubeconfig without a cluster is refused", () => {
  assert.throws(
    () => apiServerConnection(connectionConfig("http://api.example.com:8080")),
    (error: unknown) => error instanceof ApiServerConnectionError && /plain HTTP on another host/.test((error as Error).message),
  );
  assert.throws(() => apiServerConnection(new KubeConfig()), /no current cluster/);
  const proxied = kubeConfigFor({ server: "http://127.0.0.1:8001", skipTLSVerify: true, proxyUrl: "http://proxy.example.com:3128", token: "t0ken" });
  assert.throws(() => apiServerConnection(proxied), /a plain-HTTP server is not reached through proxy-url/, "credentials would travel in clear to the proxy");
});

Connection("a kubeconfig's proxy-url is honoured: CONNECT through an HTTP proxy, a SOCKS5 greeting to a SOCKS proxy", async () => {
  for (const [scheme, expected] of [
    ["http", (first: Buffer) => first.toString("latin1").startsWith("CONNECT api.example.com:6443 ")],
    ["socks5", (first: Buffer) => first[0] === 5],
  ] as const) {
    const firstBytes: Buffer[] = [];
    const proxy = createNetServer((socket) => socket.once("data", (data: Buffer) => (firstBytes.push(data), socket.destroy())));
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const config = kubeConfigFor({ server: "https://api.example.com:6443", proxyUrl: `${scheme}://127.0.0.1:${(proxy.address() as AddressInfo).port}`, token: "t0ken" });
    const connection = apiServerConnection(config, { timeoutMs: 2000 });
    try {
      await connection.send({ method: "GET", path: "/api/v1/namespaces/a" }).catch(() => undefined);
      assert.ok(firstBytes.length > 0, `${scheme}: the proxy was never reached`);
      assert.ok(expected(firstBytes[0]!), `${scheme}: ${firstBytes[0]!.toString("latin1").slice(0, 40)}`);
    } finally {
      await connection.close();
      proxy.close();
    }
  }
});

Connection("credentials that never come (an exec plugin waiting for a login) fail the call at its signal, not never", async () => {
  const config = kubeConfigFor({ server: "https://127.0.0.1:1" });
  const user = config.getCurrentUser()!;
  config.addAuthenticator({ isAuthProvider: (u) => u.name === user.name, applyAuthentication: () => new Promise<void>(() => {}) });
  const connection = apiServerConnection(config, { timeoutMs: 2000 });
  const started = Date.now();
  try {
    const outcome = await Promise.race([
      connection.send({ method: "GET", path: "/api", signal: AbortSignal.timeout(300) }).then(
        () => "answered",
        (error: unknown) => (error instanceof ApiServerConnectionError ? `refused: ${error.message}` : `failed: ${String(error)}`),
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve("still waiting after 3 s"), 3000)),
    ]);
    assert.match(outcome, /^refused: GET \/api: its credentials were not applied in time/);
    assert.ok(Date.now() - started < 2000, `${Date.now() - started} ms`);
  } finally {
    await connection.close();
  }
});

Connection("a proxy scheme the connection cannot speak, and a server URL carrying a password, are refused before anything is sent", () => {
  for (const proxyUrl of ["socks4://127.0.0.1:1080", "socks4a://127.0.0.1:1080", "socks5h://127.0.0.1:1080"]) {
    assert.throws(() => apiServerConnection(kubeConfigFor({ server: "https://api.example.com", proxyUrl })), /proxy-url scheme is not one this product speaks/, proxyUrl);
  }
  assert.throws(
    () => apiServerConnection(kubeConfigFor({ server: "https://admin:hunter2@api.example.com" })),
    (error: unknown) => error instanceof Error && /carries a user name or password/.test(error.message) && !error.message.includes("hunter2"),
  );
});

Connection("a body longer than the call allows is not read: answered tooLarge, whether the server declared its length or not", async () => {
  const big = JSON.stringify({ items: "x".repeat(5000) });
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json", ...(req.url?.includes("declared") ? { "content-length": String(big.length) } : {}) });
    if (req.url?.includes("declared")) return void res.end(big);
    // No length: the body comes in pieces, and the reader must stop on its own count.
    for (let at = 0; at < big.length; at += 1000) res.write(big.slice(at, at + 1000));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const connection = apiServerConnection(connectionConfig(url, true));
  try {
    for (const path of ["/declared", "/chunked"]) {
      const refused = await connection.send({ method: "GET", path, maxBodyBytes: 4096 });
      assert.equal({ status: refused.status, body: refused.body, tooLarge: refused.tooLarge }, { status: 200, body: undefined, tooLarge: true }, path);
      const read = await connection.send({ method: "GET", path, maxBodyBytes: big.length });
      assert.is(read.tooLarge, undefined, path);
      assert.is((read.body as { items: string }).items.length, 5000, path);
      assert.is(read.bytes, big.length, path);
    }
    // The connection is still good for the next call.
    assert.is((await connection.send({ method: "GET", path: "/declared" })).status, 200);
  } finally {
    await connection.close();
    server.close();
  }
});

Connection.run();
