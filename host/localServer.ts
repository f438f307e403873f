import { timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { maxBodyBytes, type HttpCall } from "../lib/admission/httpExchange.js";
import { memberAddress, serveAdmission } from "../lib/app/serveAdmission.js";
import { webhookRoutes, type WebhookRoute } from "../lib/app/webhooks.js";
import { clusterSecretHeader } from "../lib/fleet/fleetRouter.js";
import { invoke, loadFunctionsApp, type LoadedApp } from "./functionsHost.js";

export interface LocalServerOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: { readonly certPem: string; readonly keyPem: string };
  /** When set, functions registered with authLevel "function" require this key, as in Azure. */
  readonly functionKey?: string;
  readonly log: (level: string, message: string) => void;
}

export interface LocalServer {
  readonly url: string;
  readonly port: number;
  /** The HTTPS server itself, for whoever wants to watch its connections (tests count handshakes). */
  readonly server: Server;
  close(): Promise<void>;
}

/**
 * Serves the Functions app over HTTPS on this machine: a development server, with the same
 * HTTP rules, policy and log lines as the Functions host, and nothing tuned for throughput.
 */
export async function startLocalServer(options: LocalServerOptions): Promise<LocalServer> {
  const serving: Serving = { functionsApp: await loadFunctionsApp(), options, base: "https://localhost" };
  const server = createServer({ cert: options.tls.certPem, key: options.tls.keyPem }, (req, res) => {
    route(serving, req, res).catch((error: unknown) => {
      options.log("error", `local host: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
      res.end("internal error\n");
    });
  });
  // An admission review is small and the API server sends one per connection burst; do not
  // let a slow or idle client hold a socket for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await listen(server, options.host, options.port);
  const port = (server.address() as AddressInfo).port;
  const url = `https://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`;
  serving.base = url;
  return {
    url,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** What every request of one local server is served with. */
interface Serving {
  readonly functionsApp: LoadedApp;
  readonly options: LocalServerOptions;
  /**
   * Request targets are read against the server's own address, never the Host header: routing
   * and the function key go by path and query alone, and a Host the URL parser refuses must not
   * make some paths fail where others are served. Set once listening, before any request.
   */
  base: string;
}

async function route(serving: Serving, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { functionsApp, options } = serving;
  const url = new URL(req.url ?? "/", serving.base);
  const match = functionsApp.find(url.pathname);
  // The path is not echoed: a url-wired member's path carries its secret.
  if (!match) return reply(res, 404, "no function at this path");
  const registration = match.registration;
  if (!registration.methods.includes((req.method ?? "GET").toUpperCase())) return reply(res, 405, `${req.method} is not allowed`);
  if (registration.authLevel !== "anonymous" && options.functionKey !== undefined && !keyMatches(req, url, options.functionKey)) {
    return reply(res, 401, "a function key is required (x-functions-key header)");
  }
  const webhook = webhookRoutes.get(registration.name);
  if (webhook) return serveAdmissionLocally(serving, webhook, match.params, req, url, res);
  const body = await readLimited(req, res, maxBodyBytes + 1);
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(req.headers)) if (value !== undefined) headers[key] = Array.isArray(value) ? value.join(", ") : value;
  const answer = await invoke(registration, { method: req.method ?? "GET", url: url.href, headers, body }, options.log);
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}

/**
 * A webhook straight from Node's request: the same HTTP rules, policy and log line as the
 * registered handler, without a Functions request, context and response for every admission.
 */
async function serveAdmissionLocally(
  serving: Serving,
  route: WebhookRoute,
  params: Readonly<Record<string, string>>,
  req: IncomingMessage,
  url: URL,
  res: ServerResponse,
): Promise<void> {
  const header = (value: string | string[] | undefined) => (value === undefined ? null : Array.isArray(value) ? value.join(", ") : value);
  // Read only when the exchange asks for it: an unknown cluster, a wrong secret or a refused
  // method is answered without taking the body in.
  let bodyRead = false;
  const call: HttpCall = {
    method: req.method ?? "GET",
    contentType: header(req.headers["content-type"]),
    contentLength: header(req.headers["content-length"]),
    timeout: url.searchParams.get("timeout"),
    readBody: (limit) => {
      bodyRead = true;
      return readLimited(req, res, limit + 1);
    },
  };
  const address = memberAddress(route.addressing, params, route.addressing === "header" ? header(req.headers[clusterSecretHeader]) : null);
  // The levels an invocation context logs with, so that both paths write the same lines.
  const { log } = serving.options;
  const reply = await serveAdmission(
    route.webhook,
    call,
    { info: (line) => log("information", line), warn: (line) => log("warning", line), error: (line) => log("error", line) },
    address,
  );
  if (!bodyRead && !req.complete) {
    // A body nobody will read is not drained either: the connection goes once the answer is out.
    res.setHeader("connection", "close");
    res.once("finish", () => req.socket.destroy());
  }
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

function keyMatches(req: IncomingMessage, url: URL, expected: string): boolean {
  const given = req.headers["x-functions-key"];
  const key = typeof given === "string" ? given : (url.searchParams.get("code") ?? "");
  const a = Buffer.from(key);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Reads at most `limit` bytes; the caller sees a longer body as exactly `limit` bytes. The rest
 * is never read: the connection is closed once the answer is written.
 */
function readLimited(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size < limit) return;
      req.off("data", onData).off("end", onEnd).pause();
      res.setHeader("connection", "close");
      res.once("finish", () => req.socket.destroy());
      resolve(Buffer.concat(chunks).subarray(0, limit));
    };
    const onEnd = () => resolve(Buffer.concat(chunks));
    req.on("data", onData).once("end", onEnd).once("error", reject);
  });
}

function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(`${message}\n`);
}
