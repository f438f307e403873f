import type { KubeConfig } from "@kubernetes/client-node";
import { Agent, ProxyAgent, request, Socks5ProxyAgent, type Dispatcher } from "undici";
import { isLoopbackHttp, plainHttpProblem } from "./plainHttp.js";

/**
 * Calls to an API server that send and receive the wire JSON exactly as written.
 *
 * @kubernetes/client-node's generated clients pass every body through their model serializer,
 * which knows model property names, not wire names: a field whose model name differs from its
 * wire name (`NetworkPolicyIngressRule.from` is `_from` there, and
 * `x-kubernetes-preserve-unknown-fields` is `x_kubernetes_preserve_unknown_fields`) is dropped
 * from what is sent and from what is read, without an error (kubernetes-client/javascript issue
 * 2825). So client-node is used here only for what it does well through its public API: loading
 * the kubeconfig, its credentials (tokens, exec plugins, client certificates) and its TLS settings
 * (`applyToHTTPSOptions`, and the cluster's `proxyUrl`). The request itself goes through undici with
 * a connection pool this module owns, and the body is the caller's JSON text.
 */

export interface ApiReply {
  readonly status: number;
  /** The JSON the server answered, parsed as is; undefined for an empty body. */
  readonly body: unknown;
  /** The API server's `Warning` headers, as a client such as kubectl would print them. */
  readonly warnings: readonly string[];
}

export interface ApiRequest {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** The path under the server's URL, with its query: `/api/v1/namespaces/x?dryRun=All`. */
  readonly path: string;
  /** Sent as JSON text, unchanged. */
  readonly body?: unknown;
  readonly contentType?: string;
}

export interface ApiServerConnection {
  /** The server's URL, for messages. */
  readonly server: string;
  send(call: ApiRequest): Promise<ApiReply>;
  close(): Promise<void>;
}

/** No answer within this long, or a server that stops sending, fails the call instead of hanging the command. */
export const defaultCallTimeoutMs = 30_000;

export class ApiServerConnectionError extends Error {
  override readonly name = "ApiServerConnectionError";
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

async function dispatcherFor(config: KubeConfig, server: string): Promise<Dispatcher | undefined> {
  const cluster = config.getCurrentCluster();
  // kubectl proxy on this machine: plain HTTP, no TLS settings to carry.
  if (isLoopbackHttp(server) && !cluster?.proxyUrl) return new Agent();
  const applied: Record<string, unknown> = {};
  await config.applyToHTTPSOptions(applied);
  // The TLS settings client-node worked out for this cluster and user: its CA, the client
  // certificate and key, the name to verify, and whether to verify at all.
  const tls = {
    ...(applied.ca === undefined ? {} : { ca: applied.ca as Buffer }),
    ...(applied.cert === undefined ? {} : { cert: applied.cert as Buffer }),
    ...(applied.key === undefined ? {} : { key: applied.key as Buffer }),
    ...(applied.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: applied.rejectUnauthorized as boolean }),
    ...(applied.servername === undefined ? {} : { servername: applied.servername as string }),
  };
  const proxy = cluster?.proxyUrl;
  if (proxy) return proxy.startsWith("socks") ? new Socks5ProxyAgent(proxy, { requestTls: tls }) : new ProxyAgent({ uri: proxy, requestTls: tls });
  return new Agent({ connect: { ...tls, keepAlive: true } });
}

/** The headers (and TLS settings) client-node applies for the kubeconfig's user. */
async function credentialsFor(config: KubeConfig, server: string): Promise<Record<string, unknown>> {
  const options: Record<string, unknown> = {};
  // kubectl proxy on this machine adds the credentials itself; client-node refuses plain HTTP
  // unless TLS checks are skipped, which mean nothing without TLS.
  if (isLoopbackHttp(server) && config.getCurrentCluster()?.skipTLSVerify !== true) return options;
  await config.applyToHTTPSOptions(options);
  return options;
}

/**
 * A connection to the kubeconfig's current cluster. Credentials are applied to every call (an
 * exec plugin's token may be renewed between them); TLS settings are read once.
 */
export function apiServerConnection(config: KubeConfig, options: { timeoutMs?: number } = {}): ApiServerConnection {
  const cluster = config.getCurrentCluster();
  if (cluster === null) throw new ApiServerConnectionError("the kubeconfig has no current cluster (set current-context)");
  const server = cluster.server.replace(/\/+$/, "");
  const problem = plainHttpProblem(server);
  if (problem !== undefined) throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: ${problem}`);
  // Plain HTTP is for a proxy on this machine; through another proxy its credentials would travel in clear.
  if (server.startsWith("http:") && cluster.proxyUrl)
    throw new ApiServerConnectionError(`the kubeconfig's cluster ${cluster.name}: a plain-HTTP server is not reached through proxy-url`);
  const timeoutMs = options.timeoutMs ?? defaultCallTimeoutMs;
  let dispatcher: Promise<Dispatcher | undefined> | undefined;

  return {
    server,
    async send(call) {
      dispatcher ??= dispatcherFor(config, server);
      const pool = await dispatcher;
      const authentication = await credentialsFor(config, server);
      const user = config.getCurrentUser();
      const headers: Record<string, string> = {
        ...headerRecord(authentication.headers),
        ...(user?.username ? { authorization: `Basic ${Buffer.from(`${user.username}:${user.password ?? ""}`).toString("base64")}` } : {}),
        accept: "application/json",
        ...(call.body === undefined ? {} : { "content-type": call.contentType ?? "application/json" }),
      };
      const url = `${server}${call.path}`;
      let reply: Dispatcher.ResponseData;
      try {
        reply = await request(url, {
          method: call.method,
          headers,
          ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
          ...(pool === undefined ? {} : { dispatcher: pool }),
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        throw new ApiServerConnectionError(`${call.method} ${call.path} at ${server}: no answer (${why})`);
      }
      const text = await reply.body.text();
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        body = text;
      }
      const warning = reply.headers.warning;
      return { status: reply.statusCode, body, warnings: warningsOf(warning) };
    },
    async close() {
      const pool = await dispatcher?.catch(() => undefined);
      dispatcher = undefined;
      await pool?.close().catch(() => {});
    },
  };
}
