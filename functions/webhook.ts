import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import type { HttpCall } from "../lib/admission/httpExchange.js";
import { memberAddress, serveAdmission } from "../lib/app/serveAdmission.js";
import { webhookRoutesOf, type Webhook, type WebhookAddressing } from "../lib/app/webhooks.js";
import { clusterSecretHeader } from "../lib/fleet/fleetRouter.js";
import { nodeReleaseProblem } from "../lib/nodeRelease.js";
import { readEndpointProtection } from "../lib/settings/endpoint.js";
import packageJson from "../package.json";
import { readBodyUpTo } from "./requestBody.js";

// Every function module loads this one before it registers anything: on a Node.js release too old
// for the bundled libraries the app loads no function, and says which release it needs.
const tooOld = nodeReleaseProblem(process.version, packageJson.engines.node);
if (tooOld) throw new Error(tooOld);

/** Adapts a Functions HTTP request to the webhook's HTTP rules, and logs one line per admission. */
export async function serveWebhook(webhook: Webhook, request: HttpRequest, context: InvocationContext, addressing: WebhookAddressing = "top"): Promise<HttpResponseInit> {
  const call: HttpCall = {
    method: request.method,
    contentType: request.headers.get("content-type"),
    contentLength: request.headers.get("content-length"),
    timeout: request.query.get("timeout"),
    readBody: (limit) => readBodyUpTo(request.body, limit),
  };
  const address = memberAddress(addressing, request.params, addressing === "header" ? request.headers.get(clusterSecretHeader) : null);
  const reply = await serveAdmission(webhook, call, { info: (line) => context.info(line), warn: (line) => context.warn(line), error: (line) => context.error(line) }, address);
  return { status: reply.status, headers: reply.headers, body: reply.body };
}

/**
 * Registers a webhook with the Functions app on the routes lib/app/webhooks.ts gives it:
 * `<webhook>` (a single cluster), `clusters/{cluster}/<webhook>` (the secret in a header, as the
 * relay sends it) and `clusters/{cluster}/{secret}/<webhook>` (url wiring, where the path is all
 * the API server sends). Which of them answer is the runtime's to say, so that both hosts and
 * every test process register the same functions whatever the settings.
 */
export function registerWebhook(webhook: Webhook): void {
  const authLevel = webhookAuthLevel();
  for (const route of webhookRoutesOf(webhook)) {
    app.http(route.functionName, {
      route: route.route,
      methods: [...allMethods],
      authLevel,
      handler: (request, context) => serveWebhook(webhook, request, context, route.addressing),
    });
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
