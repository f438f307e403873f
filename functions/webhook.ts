import type { HttpRequest, HttpResponseInit, InvocationContext } from "@azure/functions";
import { performance } from "node:perf_hooks";
import { exchangeAdmission, type HttpCall } from "../lib/admission/httpExchange.js";
import type { ReviewPolicy } from "../lib/admission/handleReview.js";
import { admissionLogLine } from "../lib/observability/admissionLog.js";
import { instanceCounters } from "../lib/observability/instanceCounters.js";
import { readEndpointProtection } from "../lib/settings.js";
import { readBodyUpTo } from "./requestBody.js";
import { admissionRuntime, takeColdStart } from "./runtime.js";

/** Adapts a Functions HTTP request to the webhook's HTTP rules, and logs one line per admission. */
export async function serveWebhook(webhook: string, policy: ReviewPolicy, request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  const started = performance.now();
  const call: HttpCall = {
    method: request.method,
    contentType: request.headers.get("content-type"),
    contentLength: request.headers.get("content-length"),
    timeout: request.query.get("timeout"),
    readBody: (limit) => readBodyUpTo(request.body, limit),
  };
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
      const line = admissionLogLine({ ...record, webhook, latencyMs: performance.now() - started, coldStart: takeColdStart() });
      if (record.decision === "error") context.warn(line);
      else context.info(line);
    }
    return { status: reply.status, headers: reply.headers, body: reply.body };
  } catch (error) {
    // A bug, not a policy answer: the API server treats a 500 as a failed call and, with
    // failurePolicy Fail, refuses the pod.
    context.error(`${webhook}: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: "internal error\n" };
  }
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
