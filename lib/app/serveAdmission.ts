import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { exchangeAdmission, plainReply, type HttpCall, type HttpReply } from "../admission/httpExchange.js";
import type { MemberAddress } from "../fleet/fleetRouter.js";
import { admissionLogLine } from "../observability/admissionLog.js";
import { instanceCounters } from "../observability/instanceCounters.js";
import { admissionRuntime, takeColdStart } from "./runtime.js";
import type { Webhook, WebhookAddressing } from "./webhooks.js";

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
export async function serveAdmission(webhook: Webhook, call: HttpCall, log: AdmissionLogSink, address: MemberAddress = topLevel): Promise<HttpReply> {
  const name = webhook.name;
  const started = performance.now();
  try {
    const runtime = await admissionRuntime();
    const route = runtime.router.route(address, name);
    if (!route.ok) {
      // The router writes its own line for what an operator must act on (a member out of
      // service, a wrong secret); any other refusal of the route is counted here.
      if (route.warning) log.warn(route.warning);
      else log.warn(refusalLine(address, name, route.status, "no cluster is served at this address"));
      return plainReply(route.status, route.message);
    }
    const member = route.member;
    member.enter();
    try {
      const { reply, record } = await exchangeAdmission(call, webhook.policy, {
        credSpecs: member.credSpecs,
        authorizer: member.authorizer,
        settings: runtime.settings,
        budgetMs: runtime.settings.admissionBudgetMs,
      });
      // A request refused before it was judged (not POST, not JSON, too large, no review in it)
      // writes no admission line: it is counted as a refused request instead.
      if (!record && reply.status !== 200) log.warn(refusalLine(address, name, reply.status, reply.body.slice(0, 300), member.name));
      if (record) {
        instanceCounters.admissions += 1;
        const line = admissionLogLine({ ...record, cluster: member.name, webhook: name, latencyMs: performance.now() - started, coldStart: takeColdStart() });
        // A failure, or a request no API server should send: both are for the operator to see.
        if (record.decision === "error" || record.decision === "invalid") log.warn(line);
        else log.info(line);
      }
      return reply;
    } finally {
      member.leave();
    }
  } catch (error) {
    // A bug, not a policy answer: the API server treats a 500 as a failed call and, with
    // failurePolicy Fail, refuses the pod.
    const correlationId = randomUUID();
    log.error(`${name}: unexpected failure (correlation ID ${correlationId}): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    log.error(refusalLine(address, name, 500, "an unexpected failure in the function (its stack is in the line before, under the same correlation ID)", undefined, correlationId));
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: `internal error (correlation ID ${correlationId})\n` };
  }
}

const topLevel: MemberAddress = { kind: "top" };

/**
 * One `gmsa.requestRefused` line (lib/observability/cluster-events.json): a request the function
 * answered without judging a review, with the cluster it was for where the address names one.
 * Never the secret of a path: only the cluster's name.
 */
function refusalLine(address: MemberAddress, webhook: string, status: number, reason: string, member?: string, correlationId?: string): string {
  const cluster = member ?? (address.kind === "top" ? "default" : address.cluster.slice(0, 63));
  return JSON.stringify({ event: "gmsa.requestRefused", cluster, webhook, status, reason, ...(correlationId ? { correlationId } : {}) });
}

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
