import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { performance } from "node:perf_hooks";
import { exchangeAdmission, type HttpCall, type HttpReply } from "../lib/admission/httpExchange.js";
import type { ReviewPolicy } from "../lib/admission/handleReview.js";
import { admissionLogLine } from "../lib/observability/admissionLog.js";
import { instanceCounters } from "../lib/observability/instanceCounters.js";
import { readEndpointProtection } from "../lib/settings.js";
import { readBodyUpTo } from "./requestBody.js";
import { admissionRuntime, takeColdStart } from "./runtime.js";

/** Where an admission's log line goes: the Functions invocation's log, or the local host's. */
export interface AdmissionLogSink {
  info(line: string): void;
  warn(line: string): void;
  error(line: string): void;
}

/**
 * One admission under the webhook's HTTP rules, whatever host carries it: the instance's runtime,
 * the exchange, and one log line per admission. A host adapts its own request type to `HttpCall`.
 */
export async function serveAdmission(webhook: string, policy: ReviewPolicy, call: HttpCall, log: AdmissionLogSink): Promise<HttpReply> {
  const started = performance.now();
  try {
    const runtime = await admissionRuntime();
    const { reply, record } = await exchangeAdmission(call, policy, {
      credSpecs: runtime.cluster.credSpecs,
      authorizer: runtime.cluster.authorizer,
      settings: runtime.settings,
      budgetMs: runtime.settings.admissionBudgetMs,
    });
    if (record) {
      instanceCounters.admissions += 1;
      const line = admissionLogLine({ ...record, cluster: "default", webhook, latencyMs: performance.now() - started, coldStart: takeColdStart() });
      if (record.decision === "error") log.warn(line);
      else log.info(line);
    }
    return reply;
  } catch (error) {
    // A bug, not a policy answer: the API server treats a 500 as a failed call and, with
    // failurePolicy Fail, refuses the pod.
    log.error(`${webhook}: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: "internal error\n" };
  }
}

/** Adapts a Functions HTTP request to the webhook's HTTP rules, and logs one line per admission. */
export async function serveWebhook(webhook: string, policy: ReviewPolicy, request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  const call: HttpCall = {
    method: request.method,
    contentType: request.headers.get("content-type"),
    contentLength: request.headers.get("content-length"),
    timeout: request.query.get("timeout"),
    readBody: (limit) => readBodyUpTo(request.body, limit),
  };
  const reply = await serveAdmission(webhook, policy, call, { info: (line) => context.info(line), warn: (line) => context.warn(line), error: (line) => context.error(line) });
  return { status: reply.status, headers: reply.headers, body: reply.body };
}

/**
 * The webhooks this app registers, by function name, with their policies: the local host serves
 * these straight from its own request type, without building Functions request objects for each
 * admission. The Functions host knows nothing of this table and calls the registered handlers.
 */
export const webhookPolicies = new Map<string, ReviewPolicy>();

/** Registers a webhook with the Functions app, and with the table above. */
export function registerWebhook(name: string, policy: ReviewPolicy, handler: (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>): void {
  app.http(name, { route: name, methods: [...allMethods], authLevel: webhookAuthLevel(), handler });
  webhookPolicies.set(name, policy);
}

/** Every method reaches the handler, so that the HTTP rules can answer 405 themselves. */
export const allMethods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;

/**
 * Function keys protect the webhooks when they are reachable publicly (relay wiring). Called
 * while the functions are registered: a bad setting throws here, so the app loads no function
 * at all instead of registering one with the wrong authorization level.
 */
export function webhookAuthLevel(env: NodeJS.ProcessEnv = process.env): "anonymous" | "function" {
  return readEndpointProtection(env).requireFunctionKey ? "function" : "anonymous";
}
