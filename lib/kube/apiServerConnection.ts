import { createHash } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { Agent, ProxyAgent, request, Socks5ProxyAgent, type Dispatcher } from "undici";
import { isLoopbackHttp, plainHttpProblem } from "./plainHttp.js";

/**
 * Calls to an API server that send and receive the wire JSON exactly as written, over one pool
 * of kept-alive connections per cluster.
 *
 * @kubernetes/client-node's generated clients pass every body through their model serializer,
 * which knows model property names, not wire names: a field whose model name differs from its
 * wire name (`NetworkPolicyIngressRule.from` is `_from` there, and
 * `x-kubernetes-preserve-unknown-fields` is `x_kubernetes_preserve_unknown_fields`) is dropped
 * from what is sent and from what is read, without an error (kubernetes-client/javascript issue
 * 2825). Its clients also build a new connection pool for every request, so each call pays a TLS
 * handshake. So client-node is used here only for what it does well through its public API:
 * loading the kubeconfig, its credentials (tokens, exec plugins, client certificates, custom
 * authenticators) and its TLS settings (`applyToHTTPSOptions`). The
 * request itself goes through undici over a pool this module owns, and the body is the caller's
 * JSON text.
 */

/**
 * What a connection reads of how a cluster is reached, on every call: the current cluster, its
 * user, and the credentials and TLS settings of a request. client-node's KubeConfig answers them
 * for a kubeconfig or the in-cluster service account; EntraApiAccess (entraApiAccess.ts) for a
 * managed cluster reached with Entra tokens, without loading client-node.
 */
export type ApiServerCredentials = Pick<KubeConfig, "getCurrentCluster" | "getCurrentUser" | "applyToHTTPSOptions">;

export interface ApiReply {
  readonly status: number;
  /** The JSON the server answered, parsed as is; undefined for an empty body. */
  readonly body: unknown;
  /** The API server's `Warning` headers, as a client such as kubectl would print them. */
  readonly warnings: readonly string[];
  /** `Retry-After`, in milliseconds, when the server sent one in whole seconds. */
  readonly retryAfterMs?: number;
  /** The body was longer than the call allowed: it was not read, and `body` is undefined. */
  readonly tooLarge?: true;
  /** How long the body read was, in bytes. */
  readonly bytes?: number;
}

export interface ApiRequest {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** The path under the server's URL, with its query: `/api/v1/namespaces/x?dryRun=All`. */
  readonly path: string;
  /** Sent as JSON text, unchanged. */
  readonly body?: unknown;
  readonly contentType?: string;
  /** Ends the call early: the caller's deadline. */
  readonly signal?: AbortSignal;
  /** This call's own bound, instead of the connection's. */
  readonly timeoutMs?: number;
  /** The longest body read; a longer one is left unread and answered `tooLarge`. Default 16 MiB. */
  readonly maxBodyBytes?: number;
}

/** A watch's open stream: one JSON event per line, as the API server writes them. */
export interface ApiStream {
  readonly status: number;
  /** The error the server answered instead of a stream (a status other than 200). */
  readonly body: unknown;
  /** Each line of the stream as it arrives; ends when the server ends the stream. */
  lines(): AsyncIterable<string>;
}

export interface StreamRequest {
  readonly path: string;
  readonly signal: AbortSignal;
  /** A stream that sends nothing for this long is given up (a silent network, not a quiet cluster: pass more than the watch's own timeout). */
  readonly idleTimeoutMs: number;
  /** The longest line read; a longer one breaks the stream. Default 16 MiB. */
  readonly maxLineChars?: number;
}

export interface ApiServerConnection {
  /** The server's URL, for messages. */
  readonly server: string;
  send(call: ApiRequest): Promise<ApiReply>;
  stream(call: StreamRequest): Promise<ApiStream>;
  close(): Promise<void>;
}

/**
 * The longest body read, and the longest line of a watch stream (one event), unless the call
 * says less: an object as large as the API server stores (about 1.5 MiB) with room to spare.
 * A body is held whole and then parsed, and what it parses into may take many times its length.
 */
const defaultMaxBodyBytes = 16 * 1024 * 1024;

/** No answer within this long, or a server that stops sending, fails the call instead of hanging the command. */
export const defaultCallTimeoutMs = 30_000;

/** The server did not answer: refused, reset, a TLS failure, a timeout, or the caller gave up. */
export class ApiServerConnectionError extends Error {
  override readonly name = "ApiServerConnectionError";
  /** Why, in the words of the network layer: `connect ECONNREFUSED 127.0.0.1:6443`. */
  readonly detail: string;
  constructor(message: string, detail: string) {
    super(message);
    this.detail = detail;
  }
}

function headerRecord(headers: unknown): Record<string, string> {
  const record: Record<string, string> = Object.create(null);
  if (headers === null || typeof headers !== "object") return record;
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined || value === null) continue;
    record[key.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value);
  }
  return record;
}

function warningsOf(raw: string | string[] | undefined): string[] {
  // `299 - "text"`: the API server's deprecation and validation warnings.
  return (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map((warning) => warning.replace(/^\d{3} \S+ "(.*)"$/s, "$1"));
}

function retryAfterOf(raw: string | string[] | undefined): number | undefined {
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value) * 1000;
}

function detailOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error && !error.message.includes(error.cause.message) ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}

/** What one call needs: where to send it, the headers that authenticate it, and the pool to send it over. */
interface Prepared {
  readonly server: string;
  readonly headers: Record<string, string>;
  readonly pool: Dispatcher | undefined;
}

/**
 * A connection to the kubeconfig's current cluster. Credentials are applied to every call (an
 * exec plugin's or Entra's token may be renewed between them). The pool is kept while the TLS
 * settings stay the same: a rotated CA or client certificate (or a new server URL) gets a new
 * pool, and the old one closes once its calls are done.
 */
export function apiServerConnection(config: ApiServerCredentials, options: { timeoutMs?: number } = {}): ApiServerConnection {
  const initial = target(config);
  const timeoutMs = options.timeoutMs ?? defaultCallTimeoutMs;
  let pool: { key: string; dispatcher: Dispatcher | undefined } | undefined;
  const retired = new Set<Dispatcher>();

  async function prepare(): Promise<Prepared> {
    const { server, cluster } = target(config);
    const applied: Record<string, unknown> = {};
    // kubectl proxy on this machine adds the credentials itself and needs no TLS settings;
    // client-node refuses plain HTTP unless TLS checks are skipped, which mean nothing there.
    const loopback = isLoopbackHttp(server);
    const withCredentials = !loopback || cluster.skipTLSVerify === true;
    if (withCredentials) await config.applyToHTTPSOptions(applied);
    const user = withCredentials ? config.getCurrentUser() : null;
    const headers: Record<string, string> = {
      ...headerRecord(applied.headers),
      ...(user?.username ? { authorization: `Basic ${Buffer.from(`${user.username}:${user.password ?? ""}`).toString("base64")}` } : {}),
      accept: "application/json",
    };
    // Plain HTTP is refused through a proxy (target), so this is kubectl proxy on this machine.
    if (loopback) return { server, headers, pool: undefined };
    // The TLS settings client-node worked out for this cluster and user (its CA, the client
    // certificate and key, the name to verify, whether to verify at all), and the cluster's proxy.
    const tls = tlsSettings(applied);
    const key = fingerprint(server, cluster.proxyUrl, tls);
    if (pool?.key !== key) {
      if (pool?.dispatcher) retire(pool.dispatcher);
      pool = { key, dispatcher: dispatcherFor(cluster.proxyUrl, tls) };
    }
    return { server, headers, pool: pool.dispatcher };
  }

  function retire(dispatcher: Dispatcher): void {
    retired.add(dispatcher);
    void dispatcher
      .close()
      .catch(() => {})
      .finally(() => retired.delete(dispatcher));
  }

  /**
   * Credentials may take a while (an exec plugin, a token endpoint): no longer than the call may.
   * A credential that never answers would otherwise hold the call, and its slot, for ever.
   */
  async function prepareWithin(signal: AbortSignal, what: string): Promise<Prepared> {
    if (signal.aborted) throw new ApiServerConnectionError(`${what}: given up before its credentials were applied`, "aborted");
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(new ApiServerConnectionError(`${what}: its credentials were not applied in time`, "the kubeconfig's credentials were not ready in time"));
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([prepare(), aborted]);
    } finally {
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
  }

  return {
    server: initial.server,
    async send(call) {
      const bound = call.timeoutMs ?? timeoutMs;
      const callSignal = call.signal ?? AbortSignal.timeout(bound);
      const { server, headers, pool: dispatcher } = await prepareWithin(callSignal, `${call.method} ${call.path}`);
      let reply: Dispatcher.ResponseData;
      try {
        reply = await request(`${server}${call.path}`, {
          method: call.method,
          headers: call.body === undefined ? headers : { ...headers, "content-type": call.contentType ?? "application/json" },
          ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
          ...(dispatcher === undefined ? {} : { dispatcher }),
          headersTimeout: bound,
          bodyTimeout: bound,
          signal: callSignal,
        });
      } catch (error) {
        throw new ApiServerConnectionError(`${call.method} ${call.path} at ${server}: no answer (${detailOf(error)})`, detailOf(error));
      }
      let read: Buffer | undefined;
      try {
        read = await readWithin(reply, call.maxBodyBytes ?? defaultMaxBodyBytes);
      } catch (error) {
        throw new ApiServerConnectionError(`${call.method} ${call.path} at ${server}: the answer broke off (${detailOf(error)})`, detailOf(error));
      }
      const retryAfterMs = retryAfterOf(reply.headers["retry-after"]);
      if (read === undefined) {
        return { status: reply.statusCode, body: undefined, warnings: warningsOf(reply.headers.warning), tooLarge: true, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
      }
      const text = read.toString("utf8");
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        body = text;
      }
      return { status: reply.statusCode, body, bytes: read.length, warnings: warningsOf(reply.headers.warning), ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
    },
    async stream(call) {
      const { server, headers, pool: dispatcher } = await prepareWithin(AbortSignal.any([call.signal, AbortSignal.timeout(timeoutMs)]), `GET ${call.path}`);
      let reply: Dispatcher.ResponseData;
      try {
        reply = await request(`${server}${call.path}`, {
          method: "GET",
          headers,
          ...(dispatcher === undefined ? {} : { dispatcher }),
          headersTimeout: timeoutMs,
          bodyTimeout: call.idleTimeoutMs,
          signal: call.signal,
        });
      } catch (error) {
        throw new ApiServerConnectionError(`GET ${call.path} at ${server}: no answer (${detailOf(error)})`, detailOf(error));
      }
      if (reply.statusCode !== 200) {
        const text = (await readWithin(reply, defaultMaxBodyBytes).catch(() => undefined))?.toString("utf8") ?? "";
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: kept as text.
        }
        return { status: reply.statusCode, body, lines: () => (async function* () {})() };
      }
      const source = reply.body;
      const maxLineChars = call.maxLineChars ?? defaultMaxBodyBytes;
      return {
        status: 200,
        body: undefined,
        async *lines() {
          let pending = "";
          try {
            source.setEncoding("utf8");
            for await (const chunk of source as AsyncIterable<string>) {
              pending += chunk;
              if (pending.length > maxLineChars) throw new Error(`a line of more than ${maxLineChars} characters`);
              let end = pending.indexOf("\n");
              while (end >= 0) {
                const line = pending.slice(0, end).trim();
                pending = pending.slice(end + 1);
                if (line !== "") yield line;
                end = pending.indexOf("\n");
              }
            }
          } catch (error) {
            throw new ApiServerConnectionError(`GET ${call.path} at ${server}: the stream broke off (${detailOf(error)})`, detailOf(error));
          } finally {
            source.destroy();
          }
          if (pending.trim() !== "") yield pending.trim();
        },
      };
    },
    async close() {
      const open = [pool?.dispatcher, ...retired];
      pool = undefined;
      await Promise.all(open.map((dispatcher) => dispatcher?.destroy().catch(() => {})));
    },
  };
}

/**
 * The body of a reply, or undefined when it is longer than `limit` bytes: then it is not read on
 * (the stream is destroyed), by what the server declared when it did, or as it arrives.
 */
async function readWithin(reply: Dispatcher.ResponseData, limit: number): Promise<Buffer | undefined> {
  // undici reports a body given up as an error on the stream: expected here, and not thrown.
  const giveUp = () => reply.body.on("error", () => {}).destroy();
  const declared = Number(reply.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    giveUp();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of reply.body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limit) {
      giveUp();
      return undefined;
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
}

/** The current cluster and its URL, checked: read on every call, since an Entra cluster's endpoint may be read again. */
function target(config: ApiServerCredentials): { server: string; cluster: NonNullable<ReturnType<ApiServerCredentials["getCurrentCluster"]>> } {
  const cluster = config.getCurrentCluster();
  if (cluster === null) throw new ApiServerConnectionError("the kubeconfig has no current cluster (set current-context)", "no current cluster");
  const server = cluster.server.replace(/\/+$/, "");
  const problem = plainHttpProblem(server);
  if (problem !== undefined) throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: ${problem}`, problem);
  // Plain HTTP is for a proxy on this machine; through another proxy its credentials would travel in clear.
  if (server.startsWith("http:") && cluster.proxyUrl) {
    const problem = "a plain-HTTP server is not reached through proxy-url";
    throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: ${problem}`, problem);
  }
  if (cluster.proxyUrl && !/^(https?|socks5?):\/\//i.test(cluster.proxyUrl)) {
    const problem = `its proxy-url scheme is not one this product speaks (http, https, socks5): ${cluster.proxyUrl.split(":", 1)[0]}`;
    throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: ${problem}`, problem);
  }
  if (/^[a-z]+:\/\/[^/]*@/i.test(server)) {
    const problem = "its server URL carries a user name or password: give credentials in the user entry instead";
    throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: ${problem}`, problem);
  }
  return { server, cluster };
}

/** The TLS settings a connection takes from what client-node's applyToHTTPSOptions wrote. */
interface TlsSettings {
  readonly ca?: string | Buffer;
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  readonly servername?: string;
  readonly rejectUnauthorized?: boolean;
}

function tlsSettings(applied: Record<string, unknown>): TlsSettings {
  const material = (value: unknown) => (typeof value === "string" || Buffer.isBuffer(value) ? { value } : undefined);
  const ca = material(applied.ca);
  const cert = material(applied.cert);
  const key = material(applied.key);
  return {
    ...(ca ? { ca: ca.value } : {}),
    ...(cert ? { cert: cert.value } : {}),
    ...(key ? { key: key.value } : {}),
    ...(typeof applied.servername === "string" ? { servername: applied.servername } : {}),
    ...(typeof applied.rejectUnauthorized === "boolean" ? { rejectUnauthorized: applied.rejectUnauthorized } : {}),
  };
}

/**
 * Names a pool by what it was made from, TLS material included, without writing buffers out as
 * JSON (a CA bundle is kilobytes, and this runs on every call).
 */
function fingerprint(server: string, proxyUrl: string | undefined, tls: TlsSettings): string {
  const hash = createHash("sha256")
    .update(server)
    .update("\0")
    .update(proxyUrl ?? "");
  for (const name of ["ca", "cert", "key", "servername", "rejectUnauthorized"] as const) {
    const value = tls[name];
    hash.update("\0").update(name).update("=");
    if (value !== undefined) hash.update(typeof value === "boolean" ? String(value) : value);
  }
  return hash.digest("base64");
}

function dispatcherFor(proxyUrl: string | undefined, tls: TlsSettings): Dispatcher {
  if (proxyUrl?.toLowerCase().startsWith("socks")) return new Socks5ProxyAgent(proxyUrl, { requestTls: tls });
  if (proxyUrl) return new ProxyAgent({ uri: proxyUrl, requestTls: tls, connect: { keepAlive: true } });
  return new Agent({ connect: { ...tls, keepAlive: true } });
}
