import { randomUUID } from "node:crypto";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixtures } from "../support/fixtures.js";
import { httpsCall, postReview } from "../support/httpsClient.js";
import { startLocalWebhook, type LocalWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * Real admission log lines: AdmissionReviews posted to the local host, which runs the same
 * Functions handlers (functions/webhook.ts) with the same InvocationContext logging as the
 * Function App, against a fake API server over HTTPS with the real Kubernetes client. Each
 * line is then shaped as the Functions host stores a user log in Application Insights.
 */

/** What `context.info/warn/error` handed the host, for one admission. */
export interface WrittenLine {
  readonly level: string;
  readonly message: string;
  readonly functionName: string;
}

/**
 * One row of the classic `traces` table as the Functions host writes it for a log call made in
 * function code (a "user" log). The Node.js worker sends the text to the host, which logs it
 * under the category `Function.<function name>.User` (the category table in "How to configure
 * monitoring for Azure Functions",
 * https://learn.microsoft.com/azure/azure-functions/configure-monitoring#configure-categories).
 * Its Application Insights logger keeps the text as `message`, maps the level to `severityLevel`
 * (Verbose 0, Information 1, Warning 2, Error 3, Critical 4, the trace data model's levels) and
 * puts its own keys in `customDimensions` (names from the WebJobs SDK's logging constants:
 * `Category`, `LogLevel`, `InvocationId`, plus `HostInstanceId` and `ProcessId`). The function
 * name becomes `operation_Name`, the app `cloud_RoleName`. With sampling, a kept row carries
 * the number of rows it stands for in `itemCount`; here every row is kept.
 */
export interface TraceRow {
  readonly timestamp: string;
  readonly message: string;
  readonly severityLevel: number;
  readonly itemType: "trace";
  readonly itemCount: number;
  readonly operation_Name: string;
  readonly cloud_RoleName: string;
  readonly customDimensions: Readonly<Record<string, string>>;
}

const severities: Readonly<Record<string, { level: number; name: string }>> = {
  trace: { level: 0, name: "Trace" },
  debug: { level: 0, name: "Debug" },
  information: { level: 1, name: "Information" },
  warning: { level: 2, name: "Warning" },
  error: { level: 3, name: "Error" },
};

export function asTraceRow(line: WrittenLine, hostInstanceId: string): TraceRow {
  const severity = severities[line.level];
  if (severity === undefined) throw new Error(`unknown log level ${line.level}`);
  return {
    timestamp: new Date().toISOString(),
    message: line.message,
    severityLevel: severity.level,
    itemType: "trace",
    itemCount: 1,
    operation_Name: line.functionName,
    cloud_RoleName: "func-gmsa-example",
    customDimensions: {
      Category: `Function.${line.functionName}.User`,
      LogLevel: severity.name,
      InvocationId: randomUUID(),
      HostInstanceId: hostInstanceId,
      ProcessId: String(process.pid),
    },
  };
}

/** A local host on a fake API server, and what it wrote per admission. */
export interface AdmissionRun {
  readonly api: FakeApiServer;
  /** Resets the fake to the happy path: every example credential spec, one grant. */
  reset(): void;
  /** Posts one review and returns the lines the host wrote while it ran. */
  admit(webhook: "mutate" | "validate", credSpecName?: string): Promise<WrittenLine[]>;
  /** Posts reviews at the same time; each one's lines are those naming its UID. */
  admitTogether(webhooks: readonly ("mutate" | "validate")[]): Promise<WrittenLine[][]>;
  /** Posts a body that is no review (not JSON) and returns the status and the lines the host wrote. */
  refuse(webhook: "mutate" | "validate"): Promise<{ status: number; lines: WrittenLine[] }>;
  /** A review the webhook answers 400 (an UPDATE without its old object): a malformed request, no policy decision. */
  malformed(webhook: "mutate" | "validate"): Promise<WrittenLine[]>;
  close(): Promise<void>;
}

export const runSettings = {
  GMSA_API_TIMEOUT_MS: "300",
  GMSA_ADMISSION_BUDGET_MS: "800",
  GMSA_CREDSPEC_CACHE: "false",
  GMSA_AUTH_CACHE_TTL_SECONDS: "0",
} as const;

export async function startAdmissionRun(settings: Record<string, string> = runSettings): Promise<AdmissionRun> {
  const api = await startFakeApiServer();
  let webhook: LocalWebhook;
  try {
    webhook = await startLocalWebhook({ KUBECONFIG: api.kubeconfig, ...settings });
  } catch (error) {
    await api.close();
    throw error;
  }
  const reset = () => {
    api.state.credSpecs = new Map(credSpecFixtures().map((c) => [c.metadata.name, { ...c }]));
    api.state.grants = new Set(["system:serviceaccount:apps:default|webapp1-credspec"]);
    api.state.failWith = undefined;
    api.state.failTimes = undefined;
    api.state.retryAfter = undefined;
    api.state.delayMs = undefined;
    api.calls.length = 0;
  };
  reset();
  const post = async (functionName: "mutate" | "validate", credSpecName: string): Promise<string> => {
    const candidate = pod();
    candidate.spec.containers[0]!.securityContext = gmsa(credSpecName);
    const body = review("CREATE", candidate);
    const reply = await postReview(`${webhook.server.url}/${functionName}`, webhook.caPem, body);
    if (reply.status !== 200) throw new Error(`/${functionName} answered ${reply.status}: ${reply.text}`);
    return body.request.uid;
  };
  const written = (entry: string, functionName: string): WrittenLine => {
    const space = entry.indexOf(" ");
    return { level: entry.slice(0, space), message: entry.slice(space + 1), functionName };
  };
  return {
    api,
    reset,
    async admit(functionName, credSpecName = "webapp1-credspec") {
      const before = webhook.logs.length;
      await post(functionName, credSpecName);
      return webhook.logs.slice(before).map((entry) => written(entry, functionName));
    },
    async malformed(functionName) {
      const before = webhook.logs.length;
      const candidate = pod();
      candidate.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
      const reply = await postReview(`${webhook.server.url}/${functionName}`, webhook.caPem, review("UPDATE", candidate));
      if (reply.status !== 200) throw new Error(`/${functionName} answered ${reply.status}: ${reply.text}`);
      return webhook.logs.slice(before).map((entry) => written(entry, functionName));
    },
    async refuse(functionName) {
      const before = webhook.logs.length;
      const reply = await httpsCall(`${webhook.server.url}/${functionName}`, { ca: webhook.caPem, headers: { "content-type": "application/json" }, body: "{not json" });
      return { status: reply.status, lines: webhook.logs.slice(before).map((entry) => written(entry, functionName)) };
    },
    async admitTogether(functionNames) {
      const before = webhook.logs.length;
      const uids = await Promise.all(functionNames.map((name) => post(name, "webapp1-credspec")));
      const logs = webhook.logs.slice(before);
      return uids.map((uid, index) => logs.filter((entry) => entry.includes(`"uid":"${uid}"`)).map((entry) => written(entry, functionNames[index]!)));
    },
    async close() {
      await webhook.close();
      await api.close();
    },
  };
}
