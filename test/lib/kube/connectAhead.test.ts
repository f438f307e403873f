import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import { connect as connectTcp, createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createCertificateAuthority, issueCertificate } from "../../../controlplane/pki.js";
import { apiServerConnection, connectAhead, type ApiServerCredentials } from "../../../lib/kube/apiServerConnection.js";
import { entraApiAccess } from "../../../lib/kube/entraApiAccess.js";
import { fakeCredential } from "../../support/fakeCredential.js";

/**
 * A new instance opens its connection to the API server while it fetches its first token: the
 * first call's pool must take that connection (one handshake in all), and must never be held
 * back by one that failed, closed, or was opened with other TLS settings.
 */

interface TlsServer {
  readonly url: string;
  readonly caPem: string;
  /** TLS handshakes completed, TCP connections accepted, and connections closed, as the server saw them. */
  readonly seen: { handshakes: number; connections: number; closed: number };
  /** Called with each TCP connection before its handshake, and each connection once its handshake is done. */
  onConnection?: (socket: Socket, index: number) => void;
  onHandshake?: (socket: Socket, index: number) => void;
  close(): Promise<void>;
}

/** An HTTPS server on 127.0.0.1, named by that address or (`host`) by localhost; it answers after `answerAfterMs`. */
async function startTlsServer(options: { host?: "127.0.0.1" | "localhost"; answerAfterMs?: number } = {}): Promise<TlsServer> {
  const host = options.host ?? "127.0.0.1";
  const ca = await createCertificateAuthority("connect-ahead test CA");
  const serving = await issueCertificate(ca, { commonName: host, ...(host === "localhost" ? { dnsNames: ["localhost"] } : { ipAddresses: ["127.0.0.1"] }), usage: "server" });
  const seen = { handshakes: 0, connections: 0, closed: 0 };
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (_request, response) => {
    setTimeout(() => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end('{"kind":"APIVersions"}');
    }, options.answerAfterMs ?? 0);
  });
  const self: TlsServer = {
    url: "",
    caPem: ca.certPem,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  server.on("connection", (socket: Socket) => {
    socket.on("close", () => (seen.closed += 1));
    const index = seen.connections++;
    self.onConnection?.(socket, index);
  });
  server.on("secureConnection", (socket: Socket) => {
    const index = seen.handshakes++;
    self.onHandshake?.(socket, index);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(self, { url: `https://${host}:${(server.address() as AddressInfo).port}` });
}

/** The credentials a connection reads: this server, a token, and `ca` as the CA. */
function credentialsFor(server: string, ca: string): ApiServerCredentials {
  return {
    getCurrentCluster: () => ({ name: "ahead", server, skipTLSVerify: false }),
    getCurrentUser: () => ({ name: "ahead-user" }),
    applyToHTTPSOptions: async (options: { headers?: Record<string, unknown>; ca?: unknown }) => {
      options.headers = { ...options.headers, authorization: "Bearer t0ken" };
      options.ca = ca;
    },
  } as unknown as ApiServerCredentials;
}

async function until(what: string, done: () => boolean, withinMs = 5000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const Ahead = suite("a connection opened ahead of the first call");

Ahead("the first pool for the same server and TLS settings takes it, done or still under way: its first call makes no handshake", async () => {
  for (const when of ["after its handshake", "during its handshake"] as const) {
    const server = await startTlsServer();
    const connection = apiServerConnection(credentialsFor(server.url, server.caPem));
    try {
      connectAhead(server.url, { ca: server.caPem });
      if (when === "after its handshake") await until("the handshake made ahead", () => server.seen.handshakes === 1);
      assert.is((await connection.send({ method: "GET", path: "/apis" })).status, 200, when);
      assert.is(server.seen.handshakes, 1, when);
      assert.is(server.seen.connections, 1, when);
    } finally {
      await connection.close();
      await server.close();
    }
  }
});

Ahead("for a server named by DNS name, the name the pool asks the server to prove is the one it proved: taken", async () => {
  const server = await startTlsServer({ host: "localhost" });
  const connection = apiServerConnection(credentialsFor(server.url, server.caPem));
  try {
    connectAhead(server.url, { ca: server.caPem });
    await until("the handshake made ahead", () => server.seen.handshakes === 1);
    assert.is((await connection.send({ method: "GET", path: "/apis" })).status, 200);
    assert.is(server.seen.handshakes, 1);
  } finally {
    await connection.close();
    await server.close();
  }
});

Ahead("one whose handshake hangs holds the first call no longer than its deadline, and the next call connects afresh", async () => {
  const server = await startTlsServer();
  // The first TCP connection is accepted and never answered; the others reach the server.
  let accepted = 0;
  const sockets = new Set<Socket>();
  const front = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    if (accepted++ === 0) return;
    const upstream = connectTcp(Number(new URL(server.url).port), "127.0.0.1");
    upstream.on("error", () => undefined);
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
  const connection = apiServerConnection(credentialsFor(url, server.caPem));
  try {
    connectAhead(url, { ca: server.caPem });
    await until("the connection made ahead accepted", () => accepted === 1);
    const first = Date.now();
    const refused = await connection.send({ method: "GET", path: "/apis", timeoutMs: 300 }).then(
      () => "answered",
      (error: unknown) => String(error),
    );
    assert.match(refused, /no answer/);
    assert.ok(Date.now() - first < 2000, `the first call took ${Date.now() - first} ms`);
    const second = Date.now();
    assert.is((await connection.send({ method: "GET", path: "/apis", timeoutMs: 5000 })).status, 200);
    assert.ok(Date.now() - second < 2000, `the second call took ${Date.now() - second} ms`);
  } finally {
    await connection.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => front.close(() => resolve()));
    await server.close();
  }
});

Ahead("a pool made after it closed unused (its first call gave up before it was sent) connects afresh for its next call", async () => {
  const server = await startTlsServer();
  // The first TCP connection is accepted and never answered; the others reach the server.
  let accepted = 0;
  const sockets = new Set<Socket>();
  const front = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    if (accepted++ === 0) return;
    const upstream = connectTcp(Number(new URL(server.url).port), "127.0.0.1");
    upstream.on("error", () => undefined);
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
  // Credentials that take longer than the first call may wait: its pool is made, but nothing is sent.
  const slow = credentialsFor(url, server.caPem);
  const apply = slow.applyToHTTPSOptions.bind(slow);
  slow.applyToHTTPSOptions = async (options) => {
    await new Promise((resolve) => setTimeout(resolve, 200));
    await apply(options);
  };
  const connection = apiServerConnection(slow);
  try {
    connectAhead(url, { ca: server.caPem }, { lifetimeMs: 400 });
    const first = await connection.send({ method: "GET", path: "/apis", timeoutMs: 50 }).then(
      () => "answered",
      (error: unknown) => String(error),
    );
    assert.match(first, /credentials were not applied in time/);
    // Past the connection's lifetime: it was closed, unused, by then.
    await new Promise((resolve) => setTimeout(resolve, 600));
    const started = Date.now();
    assert.is((await connection.send({ method: "GET", path: "/apis", timeoutMs: 3000 })).status, 200);
    assert.ok(Date.now() - started < 1500, `the next call took ${Date.now() - started} ms`);
  } finally {
    await connection.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => front.close(() => resolve()));
    await server.close();
  }
});

Ahead("waiting, it keeps no process alive; taken, the pool keeps the process alive until its call is answered", async () => {
  const child = join(__dirname, "..", "..", "support", "connectAheadChild.ts");
  const dir = mkdtempSync(join(tmpdir(), "gmsa-connect-ahead-"));
  // A server that never finishes a handshake: a process waiting on it alone exits at once.
  // (Read, so that it sees the child's end of the connection and closes.)
  const silent = createNetServer((socket) => socket.on("error", () => undefined).resume());
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const server = await startTlsServer({ answerAfterMs: 1000 });
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, server.caPem);
  const run = (mode: string, url: string) =>
    new Promise<{ ms: number; stdout: string }>((resolve, reject) => {
      const started = Date.now();
      execFile(process.execPath, ["--import", "tsx", child, mode, url, caFile], { timeout: 20_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`${mode}: ${error.message}\n${stderr}`)) : resolve({ ms: Date.now() - started, stdout }),
      );
    });
  try {
    const [alone, calling, aloneBaseline] = await Promise.all([
      run("ahead-only", `https://127.0.0.1:${(silent.address() as AddressInfo).port}`),
      run("ahead-then-call", server.url),
      // The same process's start and exit with nothing to wait for: what "at once" is here.
      run("ahead-only", "http://127.0.0.1:1"),
    ]);
    assert.ok(
      alone.ms < aloneBaseline.ms + 3000,
      `a process waiting only on a connection opened ahead exited after ${alone.ms} ms (${aloneBaseline.ms} ms with nothing to wait for)`,
    );
    assert.is(calling.stdout.trim(), "status 200");
  } finally {
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    await server.close();
  }
});

Ahead("one opened with other TLS settings is not taken, and is closed when its time is up", async () => {
  const server = await startTlsServer();
  const connection = apiServerConnection(credentialsFor(server.url, server.caPem));
  try {
    // The same CA with a line more: a bundle the pool would not have been made from.
    connectAhead(server.url, { ca: `${server.caPem}\n` }, { lifetimeMs: 300 });
    await until("the handshake made ahead", () => server.seen.handshakes === 1);
    assert.is((await connection.send({ method: "GET", path: "/apis" })).status, 200);
    assert.is(server.seen.handshakes, 2, "the pool connected itself");
    await until("the connection made ahead closed", () => server.seen.closed === 1, 3000);
  } finally {
    await connection.close();
    await server.close();
  }
});

Ahead("one the server refused or closed is not used: the pool connects itself and the call is answered", async () => {
  for (const how of ["refused before its handshake", "closed after its handshake"] as const) {
    const server = await startTlsServer();
    if (how === "refused before its handshake") server.onConnection = (socket, index) => index === 0 && socket.destroy();
    else server.onHandshake = (socket, index) => index === 0 && socket.destroy();
    const connection = apiServerConnection(credentialsFor(server.url, server.caPem));
    try {
      connectAhead(server.url, { ca: server.caPem });
      await until(`the connection made ahead ${how}`, () => server.seen.closed === 1);
      // The client may see the close a moment after the server: give it that moment.
      await new Promise((resolve) => setTimeout(resolve, 20));
      const started = Date.now();
      assert.is((await connection.send({ method: "GET", path: "/apis", timeoutMs: 3000 })).status, 200, how);
      assert.ok(Date.now() - started < 1000, `${how}: answered after ${Date.now() - started} ms`);
      assert.is(server.seen.connections, 2, how);
    } finally {
      await connection.close();
      await server.close();
    }
  }
});

Ahead("Entra access opens the connection while it fetches its first token, and the first call's pool takes it", async () => {
  const server = await startTlsServer();
  const credential = fakeCredential([{ token: "A", lifetimeMs: 3_600_000 }]);
  // The token does not come until the handshake is done: it was made while the token was fetched.
  credential.hold();
  const accessing = entraApiAccess({ credential, server: server.url, caPem: server.caPem, log: () => undefined });
  await until("the handshake, while the token is held", () => server.seen.handshakes === 1);
  credential.release();
  const connection = apiServerConnection(await accessing);
  try {
    assert.is((await connection.send({ method: "GET", path: "/apis" })).status, 200);
    assert.is(server.seen.handshakes, 1);
    assert.is(server.seen.connections, 1);
  } finally {
    await connection.close();
    await server.close();
  }
});

Ahead("nothing is opened ahead for plain HTTP (kubectl proxy on this machine)", async () => {
  let connections = 0;
  const plain = createNetServer(() => (connections += 1));
  await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
  try {
    connectAhead(`http://127.0.0.1:${(plain.address() as AddressInfo).port}`, {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.is(connections, 0);
  } finally {
    await new Promise<void>((resolve) => plain.close(() => resolve()));
  }
});

Ahead.run();
