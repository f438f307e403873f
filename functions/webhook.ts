import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { performance } from "node:perf_hooks";
import { exchangeAdmission, plainReply, type HttpCall, type HttpReply } from "../lib/admission/httpExchange.js";
import type { ReviewBudget } from "../lib/admission/handleReview.js";
import type { PodPorts } from "../lib/gmsa/podWebhook.js";
import type { WebhookPolicy } from "../lib/webhook/policy.js";
import { clusterSecretHeader, type MemberAddress } from "../lib/fleet/fleetRouter.js";
import { admissionLogLine } from "../lib/observability/admissionLog.js";
import { instanceCounters } from "../lib/observability/instanceCounters.js";
import { nodeReleaseProblem } from "../lib/nodeRelease.js";
import { readEndpointProtection } from "../lib/settings/endpoint.js";
import packageJson from "../package.json";
import { readBodyUpTo } from "./requestBody.js";
import { admissionRuntime, takeColdStart } from "./runtime.js";

/** What every webhook is handed: the member's ports and the admission budget (the credential spec webhook uses none of them). */
export type AdmissionPolicy = WebhookPolicy<PodPorts & ReviewBudget>;

// Every function module loads this one before it registers anything: on a Node.js release too old
// for the bundled libraries the app loads no function, and says which release it needs.
const tooOld = nodeReleaseProblem(process.version, packageJson.engines.node);
if (tooOld) throw new Error(tooOld);

/** Where an admission's log line goes: the Functions invocation's log, or the local host's. */
export interface AdmissionLogSink {
  info(line: string): void;
  warn(line: string): void;
  error(line: string): void;
}

/**
 * One admission under the webhook's HTTP rules, whatever host carries it: the member the request
 * is for, the exchange, and one log line per admission. A host adapts its own request type to
 * `HttpCall` and says how the request addressed its cluster. An unknown cluster or a wrong secret
 * is answered before the body is read or any cluster client is started.
 */
export async function serveAdmission(webhook: string, policy: AdmissionPolicy, call: HttpCall, log: AdmissionLogSink, address: MemberAddress = topLevel): Promise<HttpReply> {
  const started = performance.now();
  try {
    const runtime = await admissionRuntime();
    const route = runtime.router.route(address, webhook);
    if (!route.ok) {
      if (route.warning) log.warn(route.warning);
      return plainReply(route.status, route.message);
    }
    const member = route.member;
    member.enter();
    try {
      const { reply, record } = await exchangeAdmission(call, policy, {
        credSpecs: member.credSpecs,
        authorizer: member.authorizer,
        settings: runtime.settings,
        budgetMs: runtime.settings.admissionBudgetMs,
      });
      if (record) {
        instanceCounters.admissions += 1;
        const line = admissionLogLine({ ...record, cluster: member.name, webhook, latencyMs: performance.now() - started, coldStart: takeColdStart() });
        if (record.decision === "error") log.warn(line);
        else log.info(line);
      }
      return reply;
    } finally {
      member.leave();
    }
  } catch (error) {
    // A bug, not a policy answer: the API server treats a 500 as a failed call and, with
    // failurePolicy Fail, refuses the pod.
    log.error(`${webhook}: unexpected failure: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: "internal error\n" };
  }
}

const topLevel: MemberAddress = { kind: "top" };

/** How a route addresses its cluster: today's paths, the cluster in the path, or the cluster and its secret. */
export type WebhookAddressing = MemberAddress["kind"];

/** The member address of a request, from its route's parameters and the secret header. */
export function memberAddress(
  addressing: WebhookAddressing,
  params: { readonly cluster?: string | undefined; readonly secret?: string | undefined },
  secretHeader: string | null,
): MemberAddress {
  if (addressing === "top") return topLevel;
  const cluster = params.cluster ?? "";
  return addressing === "header" ? { kind: "header", cluster, secret: secretHeader } : { kind: "path", cluster, secret: params.secret ?? "" };
}

/** Adapts a Functions HTTP request to the webhook's HTTP rules, and logs one line per admission. */
export async function serveWebhook(
  webhook: string,
  policy: AdmissionPolicy,
  request: HttpRequest,
  context: InvocationContext,
  addressing: WebhookAddressing = "top",
): Promise<HttpResponseInit> {
  const call: HttpCall = {
    method: request.method,
    contentType: request.headers.get("content-type"),
    contentLength: request.headers.get("content-length"),
    timeout: request.query.get("timeout"),
    readBody: (limit) => readBodyUpTo(request.body, limit),
  };
  const address = memberAddress(addressing, request.params, addressing === "header" ? request.headers.get(clusterSecretHeader) : null);
  const reply = await serveAdmission(
    webhook,
    policy,
    call,
    { info: (line) => context.info(line), warn: (line) => context.warn(line), error: (line) => context.error(line) },
    address,
  );
  return { status: reply.status, headers: reply.headers, body: reply.body };
}

/** A registered webhook route: which webhook, its policy, and how it addresses its cluster. */
export interface WebhookRoute {
  readonly webhook: string;
  readonly policy: AdmissionPolicy;
  readonly addressing: WebhookAddressing;
}

/**
 * The webhook routes this app registers, by function name: the local host serves these straight
 * from its own request type, without building Functions request objects for each admission. The
 * Functions host knows nothing of this table and calls the registered handlers.
 */
export const webhookRoutes = new Map<string, WebhookRoute>();

/**
 * Registers a webhook with the Functions app on its three routes, and with the table above:
 * `<webhook>` (a single cluster), `clusters/{cluster}/<webhook>` (the secret in a header, as the
 * relay sends it) and `clusters/{cluster}/{secret}/<webhook>` (url wiring, where the path is all
 * the API server sends). Which of them answer is the runtime's to say, so that both hosts and
 * every test process register the same functions whatever the settings.
 */
export function registerWebhook(name: string, policy: AdmissionPolicy, handler: (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>): void {
  const authLevel = webhookAuthLevel();
  app.http(name, { route: name, methods: [...allMethods], authLevel, handler });
  app.http(`cluster-${name}`, {
    route: `clusters/{cluster}/${name}`,
    methods: [...allMethods],
    authLevel,
    handler: (request, context) => serveWebhook(name, policy, request, context, "header"),
  });
  app.http(`cluster-secret-${name}`, {
    route: `clusters/{cluster}/{secret}/${name}`,
    methods: [...allMethods],
    authLevel,
    handler: (request, context) => serveWebhook(name, policy, request, context, "path"),
  });
  webhookRoutes.set(name, { webhook: name, policy, addressing: "top" });
  webhookRoutes.set(`cluster-${name}`, { webhook: name, policy, addressing: "header" });
  webhookRoutes.set(`cluster-secret-${name}`, { webhook: name, policy, addressing: "path" });
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
