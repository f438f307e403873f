import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { aksControlPlane, appTraces, requests, traces, type KustoTable } from "./applicationInsightsTables.js";
import { asTraceRow, runSettings, startAdmissionRun, type AdmissionRun, type TraceRow, type WrittenLine } from "./admissionTraces.js";
import { type BicepFile, declared, evaluate, infraFile, property, repoRoot, valueOf } from "./bicepTree.js";
import { type AssumedType, type CompiledQuery, compileQuery, fieldReads, globalsWith, kustoLanguage } from "./kustoLanguage.js";
import { type DeployedQuery, type QueryScope, deployedQueries, workbookCharts } from "./monitoringQueries.js";
import { runCanary } from "../../lib/app/canary.js";
import { ofMember } from "../../lib/app/runtime.js";
import { cacheStateLevel, cacheStateLine, type CacheState } from "../../lib/observability/cacheEvents.js";
import type { AdmissionRuntime } from "../../lib/app/runtime.js";
import type { ReadinessResult } from "../../lib/canary/probe.js";
import { fleetRouter } from "../../lib/fleet/fleetRouter.js";
import { auditLineIsWarning, runAudit } from "../../lib/app/audit.js";
import { auditCluster } from "../../lib/credspec/audit.js";
import { seededCluster, seededFindings } from "../support/auditSeed.js";

interface LogSchema {
  event: string;
  fields: Record<string, string>;
  decisions: string[];
}

const schema: LogSchema = JSON.parse(readFileSync(join(repoRoot, "lib", "observability", "admission-log.json"), "utf8"));
const canarySchema = JSON.parse(readFileSync(join(repoRoot, "lib", "observability", "canary-log.json"), "utf8")) as {
  event: string;
  fields: Record<string, string>;
  ready: string;
  /** Fields that are null when not known: a conversion of them gives null, which the queries test for. */
  nullable: string[];
};
const clusterEventsSchema = JSON.parse(readFileSync(join(repoRoot, "lib", "observability", "cluster-events.json"), "utf8")) as {
  unavailable: string;
  secretRefused: string;
  requestRefused: string;
  fields: Record<string, string>;
};

const cacheSchema = JSON.parse(readFileSync(join(repoRoot, "lib", "observability", "cache-events.json"), "utf8")) as { event: string; fields: Record<string, string>; states: Record<string, string> };
const auditSchema = JSON.parse(readFileSync(join(repoRoot, "lib", "observability", "audit-log.json"), "utf8")) as { finding: string; summary: string; fields: Record<string, string> };
/** Which of the audit schema's fields each of its two lines carries. */
const auditFindingFields = ["event", "cluster", "run", "kind", "severity", "object", "problem", "action"].map((key) => auditSchema.fields[key]!);
const auditSummaryFields = ["event", "cluster", "run", "outcome", "errors", "warnings", "apiCalls", "latencyMs", "reason"].map((key) => auditSchema.fields[key]!);

/** The opt-in monitoring, deployed: its queries compile and read real lines as the others do. */
const everyOptIn = { auditEnabled: true };

type LineKind = "admission" | "canary" | "clusterEvent" | "cacheEvent" | "auditFinding" | "auditSummary";

/**
 * Which lines a query reads: the admission line, the canary's, the cluster events (one or several);
 * none for a query that parses no line (the host's requests, a search of every trace's text).
 */
function linesOf(query: DeployedQuery): LineKind[] {
  const kinds: LineKind[] = [];
  if (!query.text.includes("parse_json(message)")) return kinds;
  if (query.text.includes(`"${schema.event}"`)) kinds.push("admission");
  if (query.text.includes(`"${canarySchema.event}"`)) kinds.push("canary");
  if (query.text.includes(`"${clusterEventsSchema.unavailable}"`)) kinds.push("clusterEvent");
  if (query.text.includes(`"${cacheSchema.event}"`)) kinds.push("cacheEvent");
  if (query.text.includes(`"${auditSchema.finding}"`)) kinds.push("auditFinding");
  if (query.text.includes(`"${auditSchema.summary}"`)) kinds.push("auditSummary");
  if (kinds.length === 0) throw new Error(`${query.name} selects none of the lines the app writes`);
  return kinds;
}

const tablesFor: Readonly<Record<QueryScope, readonly KustoTable[]>> = {
  applicationInsights: [traces, requests],
  workspace: [appTraces, aksControlPlane],
};

interface Compiled {
  readonly query: DeployedQuery;
  readonly compiled: CompiledQuery;
}

function compileAll(queries: readonly DeployedQuery[]): Compiled[] {
  const globals = { applicationInsights: globalsWith(tablesFor.applicationInsights), workspace: globalsWith(tablesFor.workspace) };
  return queries.map((query) => ({ query, compiled: compileQuery(query.text, globals[query.scope]) }));
}

function errorsOf(all: readonly Compiled[]): string[] {
  return all.flatMap(({ query, compiled }) =>
    compiled.diagnostics
      .filter((diagnostic) => diagnostic.severity === "Error")
      .map((d) => `${query.name}, line ${d.line} column ${d.column}: ${d.code} ${d.message} (in: ${d.excerpt})`),
  );
}

// ---------------------------------------------------------------------------------------------

const Compile = suite<{ queries: DeployedQuery[]; compiled: Compiled[] }>("the deployed KQL compiles with the Kusto language service");

Compile.before(async (context) => {
  context.queries = await deployedQueries(everyOptIn);
  context.compiled = compileAll(context.queries);
});

Compile("every workbook chart and every alert rule under infra/ is found, with interpolation resolved", ({ queries }) => {
  const workbook = queries.filter((q) => q.kind === "workbook").map((q) => q.name.replace(/.*item /, ""));
  const alerts = queries.filter((q) => q.kind === "alert");
  // The charts, and the query of the cluster filter's choices.
  assert.equal(workbook.sort(), ["Cluster", ...workbookCharts]);
  assert.is(alerts.length, 13);
  for (const query of queries) {
    assert.not.match(query.text, /\$\{/, `${query.name} still holds Bicep interpolation`);
    assert.not.match(query.text, /\{[A-Za-z]+(:[a-z]+)?\}/, `${query.name} still holds a workbook parameter`);
    // Queries over the host's requests, every trace's text, or the API server's own log read none of the app's lines.
    const readsAppLines = !["correlation-search", "request-latency"].some((item) => query.name.endsWith(`item ${item}`)) && !query.text.startsWith("AKSControlPlane");
    if (readsAppLines) assert.ok(linesOf(query).length > 0, `${query.name} selects none of the lines the app writes`);
  }
  assert.equal(
    alerts.map((query) => linesOf(query).join("+")).sort(),
    ["", "admission", "admission", "admission", "admission", "admission", "auditFinding+auditSummary", "canary", "canary", "canary", "clusterEvent", "clusterEvent", "clusterEvent"],
  );
  // main.bicep's threshold (75% of the 4000 ms admission budget) is what the deployed alert uses.
  assert.match(alerts.map((q) => q.text).join("\n"), /P95 > 3000$/m);
});

Compile("every query compiles without an error against the table its scope sees; warnings are listed", ({ compiled }) => {
  for (const { query, compiled: result } of compiled) {
    for (const warning of result.diagnostics.filter((d) => d.severity !== "Error")) {
      console.log(`  ${warning.severity}: ${query.name}, line ${warning.line} column ${warning.column}: ${warning.code} ${warning.message}`);
    }
  }
  const errors = errorsOf(compiled);
  assert.equal(errors, [], `\n${errors.join("\n")}`);
});

Compile("the check catches a misspelled column, a wrong type and a misspelled function, naming the query and the place", ({ queries }) => {
  const base = queries.find((query) => query.name.endsWith("item admissions-by-cluster"))!;
  const broken: DeployedQuery[] = [
    { ...base, name: "misspelled column", text: base.text.replace("project timestamp", "project timestmp") },
    { ...base, name: "string compared with a number", text: `${base.text}\n| where Decision > 3` },
    { ...base, name: "misspelled function", text: base.text.replace("parse_json(", "parse_jsn(") },
    { ...base, name: "workspace table on an Application Insights scope", text: base.text.replace(/^traces/, "AppTraces") },
  ];
  const errors = errorsOf(compileAll(broken));
  assert.equal(
    broken.map((q) => errors.some((e) => e.startsWith(`${q.name}, line `))),
    broken.map(() => true),
    errors.join("\n"),
  );
  assert.match(errors.join("\n"), /misspelled column, line \d+ column \d+: KS\d+ .*timestmp/);
});

Compile("counts, sums and percentiles weigh each row by itemCount: the Functions host samples traces", ({ compiled }) => {
  const language = kustoLanguage();
  // Aggregates whose answer changes when a kept row stands for several admissions.
  const rowAggregates = new Set(["count", "countif", "dcount", "dcountif", "sum", "sumif", "avg", "avgif", "percentile", "percentiles", "percentilew", "percentilesw"]);
  const weight = new Set(["itemCount", "ItemCount"]);
  const unweighted: string[] = [];
  let aggregates = 0;
  // The API server's log in AKSControlPlane is not sampled: each row is one line.
  for (const { query, compiled: result } of compiled.filter(({ query }) => !query.text.startsWith("AKSControlPlane"))) {
    result.code.Syntax?.WalkNodes((node) => {
      if (!(node instanceof language.Syntax.FunctionCallExpression) || !rowAggregates.has(node.Name?.SimpleName ?? "")) return;
      aggregates += 1;
      let weighted = false;
      node.ArgumentList?.WalkNodes((inner) => {
        if (inner instanceof language.Syntax.NameReference && weight.has(inner.SimpleName ?? "")) weighted = true;
      });
      if (!weighted) unweighted.push(`${query.name}: ${node.toString()?.trim()}`);
    });
  }
  assert.equal(unweighted, []);
  assert.ok(aggregates >= 15, `only ${aggregates} aggregates seen`);
});

// ---------------------------------------------------------------------------------------------

interface RealRun {
  run: AdmissionRun;
  rows: TraceRow[];
  /** The canary's and the cluster events' lines, written by the code that writes them in the app. */
  canaryRows: TraceRow[];
  clusterEventRows: TraceRow[];
  /** The credential spec caches' lines, one per state, written by the function the caches' reports go through. */
  cacheEventRows: TraceRow[];
  /** The credential spec audit's lines over a seeded cluster, and a member out of service, as the timer writes them. */
  auditRows: TraceRow[];
  compiled: Compiled[];
  file: BicepFile;
}

const Fields = suite<RealRun>("the queries read what the webhooks write");

const hostInstanceId = "8a2f6c1e-0000-4000-8000-000000000001";

function rowsOf(lines: readonly WrittenLine[]): TraceRow[] {
  return lines.map((line) => asTraceRow(line, hostInstanceId));
}

/** The canary's lines for a ready cluster, a cluster whose API server cannot call the webhook, and one out of service. */
async function canaryLines(): Promise<WrittenLine[]> {
  const member = (name: string, result: ReadinessResult) => [name, { name, start: async () => ({ probe: async () => result }) }] as const;
  const runtime = {
    members: new Map([
      member("default", { hop: "ready", summary: "the whole path works", detail: "", caBundleDaysLeft: 400 }),
      member("beta", { hop: "apiServerToWebhook", summary: "the API server could not call the webhook", detail: "x509: certificate signed by unknown authority" }),
    ]),
    unavailable: new Map([["gamma", "its kubeconfig names no current context"]]),
  } as unknown as AdmissionRuntime;
  return (await runCanary(runtime)).map((line) => ({ level: line.outcome === "ready" ? "information" : "warning", message: JSON.stringify(line), functionName: "canary" }));
}

/** The fleet router's lines for a member out of service and a request with the wrong secret. */
function clusterEventLines(): WrittenLine[] {
  const router = fleetRouter("fleet", [
    { name: "alpha", secrets: ["alpha-secret"], member: {} },
    { name: "gamma", secrets: ["gamma-secret"], unavailable: "its kubeconfig names no current context" },
  ]);
  const warnings = [router.route({ kind: "header", cluster: "alpha", secret: "wrong" }, "mutate"), router.route({ kind: "header", cluster: "gamma", secret: "gamma-secret" }, "mutate")].map(
    (route) => (route.ok ? undefined : route.warning),
  );
  return warnings.map((warning) => {
    if (warning === undefined) throw new Error("the router wrote no line");
    return { level: "warning", message: warning, functionName: "mutate" };
  });
}

/** The audit's lines as the canary's timer writes them: a cluster with one finding of each kind, and one out of service. */
async function auditLines(): Promise<WrittenLine[]> {
  const findings = auditCluster(seededCluster(false));
  const runtime = {
    members: new Map([["alpha", { name: "alpha", start: async () => ({ audit: async () => ({ findings, apiCalls: 6, read: { credSpecs: 3, pods: 4 } }) }) }]]),
    unavailable: new Map([["gamma", "its kubeconfig names no current context"]]),
  } as unknown as AdmissionRuntime;
  return (await runAudit(runtime, { randomHostname: false })).map((line) => ({ level: auditLineIsWarning(line) ? "warning" : "information", message: JSON.stringify(line), functionName: "canary" }));
}

Fields.before(async (context) => {
  context.auditRows = rowsOf(await auditLines());
  context.canaryRows = rowsOf(await canaryLines());
  context.cacheEventRows = rowsOf(
    (Object.keys(cacheSchema.states) as CacheState[]).map((state) => ({
      level: cacheStateLevel(state) === "warn" ? "warning" : "information",
      message: ofMember("alpha", cacheStateLine("default", { state, specs: 3, reason: `a ${state} line` })),
      functionName: "mutate",
    })),
  );
  context.compiled = compileAll(await deployedQueries(everyOptIn));
  context.file = await infraFile("infra/modules/admission-monitoring.bicep");
  context.run = await startAdmissionRun();
  const { run } = context;
  const refused = await run.refuse("mutate");
  assert.is(refused.status, 400);
  context.clusterEventRows = rowsOf([...clusterEventLines(), ...refused.lines]);
  const lines: WrittenLine[] = [];
  lines.push(...(await run.admit("mutate")), ...(await run.admit("validate")), ...(await run.malformed("validate")));
  run.api.state.grants.clear();
  lines.push(...(await run.admit("validate")), ...(await run.admit("mutate")));
  run.reset();
  run.api.state.failWith = 500;
  lines.push(...(await run.admit("mutate")));
  run.reset();
  run.api.state.delayMs = 5_000;
  lines.push(...(await run.admit("validate")));
  run.reset();
  context.rows = rowsOf(lines);
});

Fields.after(async ({ run }) => {
  await run.close();
});

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function fits(value: unknown, assumed: AssumedType): boolean {
  const actual = jsonType(value);
  return assumed === "number" ? actual === "number" || actual === "integer" : actual === assumed;
}

function messageObject(row: TraceRow): Record<string, unknown> {
  const parsed: unknown = JSON.parse(row.message);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`not a JSON object: ${row.message}`);
  return Object.fromEntries(Object.entries(parsed));
}

Fields("the run covers every decision, and each admission wrote one line, a warning when it failed or was malformed", ({ rows }) => {
  assert.is(rows.length, 7);
  const decisions = rows.map((row) => String(messageObject(row)[schema.fields["decision"]!]));
  assert.equal(decisions, ["patched", "allowed", "invalid", "denied", "unchanged", "error", "error"]);
  assert.equal(new Set(decisions), new Set(schema.decisions));
  assert.equal(rows.map((row) => row.customDimensions["LogLevel"]), ["Information", "Information", "Warning", "Information", "Information", "Warning", "Warning"]);
  assert.equal(rows.map((row) => row.severityLevel), [1, 1, 2, 1, 1, 2, 2]);
});

Fields("the line is the whole message, and carries exactly the fields of admission-log.json", ({ rows }) => {
  for (const row of rows) {
    assert.ok(row.message.startsWith("{"), row.message);
    const entry = messageObject(row);
    assert.equal(Object.keys(entry).sort(), Object.values(schema.fields).sort());
    assert.is(entry[schema.fields["event"]!], schema.event);
  }
});

Fields("the audit's lines: a finding's fields and a summary's, every line of the run naming it, errors and members not audited as warnings", ({ auditRows }) => {
  const lines = auditRows.map(messageObject);
  const findings = lines.filter((line) => line[auditSchema.fields["event"]!] === auditSchema.finding);
  const summaries = lines.filter((line) => line[auditSchema.fields["event"]!] === auditSchema.summary);
  assert.equal(findings.map((line) => `${line["severity"]} ${line["kind"]} ${line["object"]}`).sort(), [...seededFindings].sort());
  for (const line of findings) assert.equal(Object.keys(line).sort(), [...auditFindingFields].sort());
  for (const line of summaries) assert.equal(Object.keys(line).sort(), [...auditSummaryFields].sort());
  assert.equal(
    summaries.map((line) => `${line["cluster"]} ${line["outcome"]} ${line["errors"]} ${line["warnings"]}`),
    ["alpha audited 3 4", "gamma failed 0 0"],
  );
  assert.is(new Set(lines.map((line) => line[auditSchema.fields["run"]!])).size, 1, "one run");
  assert.match(String(lines[0]![auditSchema.fields["run"]!]), /^[0-9a-f-]{36}$/);
  // Severity 2 in the trace: what the alert and the workbook's errors are made of, never sampled away.
  assert.equal(
    auditRows
      .filter((row) => row.severityLevel === 2)
      .map((row) => String(messageObject(row)[auditSchema.fields["object"]!] ?? messageObject(row)[auditSchema.fields["cluster"]!]))
      .sort(),
    ["GMSACredentialSpec broken", "Pod apps/gone-0", "Pod apps/lost-0", "gamma"],
  );
});

Fields("the canary's and the cluster events' lines carry exactly the fields of their schema files", ({ canaryRows, clusterEventRows }) => {
  assert.is(canaryRows.length, 3);
  for (const row of canaryRows) {
    assert.equal(Object.keys(messageObject(row)).sort(), Object.values(canarySchema.fields).sort());
    assert.is(messageObject(row)[canarySchema.fields["event"]!], canarySchema.event);
  }
  assert.equal(
    canaryRows.map((row) => messageObject(row)[canarySchema.fields["outcome"]!]),
    [canarySchema.ready, "apiServerToWebhook", "memberUnavailable"],
  );
  assert.equal(
    clusterEventRows.map((row) => messageObject(row)[clusterEventsSchema.fields["event"]!]),
    [clusterEventsSchema.secretRefused, clusterEventsSchema.unavailable, clusterEventsSchema.requestRefused],
  );
  assert.equal(
    clusterEventRows.map((row) => messageObject(row)[clusterEventsSchema.fields["status"]!]),
    [401, 503, 400],
  );
  for (const row of clusterEventRows) {
    for (const field of Object.values(clusterEventsSchema.fields)) assert.ok(field in messageObject(row), `${field} in ${row.message}`);
  }
});

Fields("every field a query takes from a trace is in every real line, with the type the query converts it to", ({ rows, canaryRows, clusterEventRows, cacheEventRows, auditRows, compiled }) => {
  const problems: string[] = [];
  let checked = 0;
  const written: Record<LineKind, { rows: TraceRow[]; fields: string[]; file: string }> = {
    admission: { rows, fields: Object.values(schema.fields), file: "admission-log.json" },
    canary: { rows: canaryRows, fields: Object.values(canarySchema.fields), file: "canary-log.json" },
    clusterEvent: { rows: clusterEventRows, fields: Object.values(clusterEventsSchema.fields), file: "cluster-events.json" },
    cacheEvent: { rows: cacheEventRows, fields: Object.values(cacheSchema.fields), file: "cache-events.json" },
    auditFinding: { rows: auditRows.filter((row) => messageObject(row)[auditSchema.fields["event"]!] === auditSchema.finding), fields: auditFindingFields, file: "audit-log.json" },
    auditSummary: { rows: auditRows.filter((row) => messageObject(row)[auditSchema.fields["event"]!] === auditSchema.summary), fields: auditSummaryFields, file: "audit-log.json" },
  };
  for (const { query, compiled: result } of compiled) {
    const kinds = linesOf(query);
    if (kinds.length === 0) continue;
    const reads = fieldReads(result);
    if (reads.length === 0) problems.push(`${query.name} reads no field of the line`);
    for (const read of reads) {
      if (read.assumed === undefined) {
        problems.push(`${query.name}: ${read.text.trim()} is used without a conversion, so its type is whatever the row holds`);
        continue;
      }
      // A query over several kinds of line (a union) reads each field from the kinds whose schema has it.
      const holders = read.source === "message" ? kinds.filter((kind) => written[kind].fields.includes(read.name)) : kinds;
      if (holders.length === 0) problems.push(`${query.name}: ${read.name} is not a field of ${kinds.map((kind) => written[kind].file).join(" or ")}`);
      for (const [holderKind, row] of holders.flatMap((kind) => written[kind].rows.map((row) => [kind, row] as const))) {
        const holder: Record<string, unknown> = read.source === "message" ? messageObject(row) : row.customDimensions;
        if (!(read.name in holder)) problems.push(`${query.name}: ${read.source} has no ${read.name} in ${row.message}`);
        else if (!fits(holder[read.name], read.assumed) && !(holder[read.name] === null && holderKind === "canary" && canarySchema.nullable.includes(read.name))) {
          problems.push(`${query.name}: ${read.name} is ${jsonType(holder[read.name])}, the query takes it as ${read.assumed}`);
        }
        checked += 1;
      }
    }
  }
  const distinct = [...new Set(problems)];
  assert.equal(distinct, [], distinct.join("\n"));
  assert.ok(checked >= 10 * 13 * rows.length, `only ${checked} checks`);
});

Fields("the field check fails on a name the line does not carry and on a wrong conversion", ({ rows, compiled }) => {
  const globals = globalsWith([traces]);
  const base = compiled[0]!.query.text;
  const decision = schema.fields["decision"]!;
  const latency = schema.fields["latencyMs"]!;
  const misspelled = fieldReads(compileQuery(base.replace(`entry["${decision}"]`, `entry["decisoin"]`), globals));
  assert.ok(misspelled.some((read) => read.name === "decisoin" && rows.every((row) => !("decisoin" in messageObject(row)))));
  const wrongType = fieldReads(compileQuery(base.replace(`todouble(entry["${latency}"])`, `tobool(entry["${latency}"])`), globals));
  const read = wrongType.find((r) => r.name === latency);
  assert.is(read?.assumed, "boolean");
  assert.not.ok(rows.every((row) => fits(messageObject(row)[latency], "boolean")));
});

// ---------------------------------------------------------------------------------------------

const Alerts = suite<{ run: AdmissionRun; file: BicepFile; main: BicepFile; functionApp: BicepFile }>("each alert counts lines that its condition writes");

Alerts.before(async (context) => {
  context.file = await infraFile("infra/modules/admission-monitoring.bicep");
  context.main = await infraFile("infra/main.bicep");
  context.functionApp = await infraFile("infra/modules/function-app.bicep");
  context.run = await startAdmissionRun();
});

Alerts.before.each(({ run }) => run.reset());

Alerts.after(async ({ run }) => {
  await run.close();
});

function entries(lines: readonly WrittenLine[]): Record<string, unknown>[] {
  return rowsOf(lines).map(messageObject);
}

const f = (key: string): string => {
  const name = schema.fields[key];
  if (name === undefined) throw new Error(`admission-log.json has no field ${key}`);
  return name;
};

Alerts("api-server-errors: while the API server hangs, every admission's line counts API errors, and a few reach the threshold", async ({ run, file }) => {
  const threshold = Number(valueOf(file, "apiErrorThreshold"));
  run.api.state.delayMs = 5_000;
  const perAdmission = await run.admitTogether(Array.from({ length: threshold }, (_, i) => (i % 2 === 0 ? "mutate" : "validate")));
  assert.equal(perAdmission.map((lines) => lines.length), perAdmission.map(() => 1));
  const written = entries(perAdmission.flat());
  assert.is(written.length, threshold);
  for (const entry of written) {
    assert.is(entry[f("decision")], "error");
    assert.ok(Number(entry[f("apiErrors")]) >= 1, JSON.stringify(entry));
  }
  const total = written.reduce((sum, entry) => sum + Number(entry[f("apiErrors")]), 0);
  assert.ok(total >= threshold, `${total} API errors from ${threshold} admissions`);
});

Alerts("api-server-errors: an API server that answers 500 refuses the admission and is counted too", async ({ run }) => {
  run.api.state.failWith = 500;
  const [entry] = entries(await run.admit("mutate"));
  assert.is(entry?.[f("decision")], "error");
  assert.ok(Number(entry?.[f("apiErrors")]) >= 1, JSON.stringify(entry));
});

Alerts("api-server-errors: a credential spec that does not exist is an answer, not an API error, and a denial; the alert selects failed admissions", async ({ run, file }) => {
  run.api.state.grants.add("system:serviceaccount:apps:default|not-there");
  const [entry] = entries(await run.admit("validate", "not-there"));
  assert.is(entry?.[f("decision")], "denied");
  assert.is(entry?.[f("apiErrors")], 0, "the 404 is not counted as an API error");
  assert.match(String(valueOf(file, "apiErrorAlertQuery")), `| where Decision == "${String(valueOf(file, "decisionError"))}" and ApiErrors > 0`);
});

Alerts("latency-near-timeout: when the API server hangs, the lines' latency passes the deployed threshold, scaled to this run's budget", async ({ run, main, functionApp }) => {
  // Deployed: the threshold is latencyAlertPercent of the admission budget main.bicep gives the
  // Function App as GMSA_ADMISSION_BUDGET_MS. Same ratio here.
  const threshold = property(declared(main, "module", "admissionMonitoring").body?.object, "params", "latencyAlertThresholdMs");
  const givenBudget = property(declared(main, "module", "functionApp").body?.object, "params", "admissionBudgetMs");
  assert.ok(threshold !== undefined && givenBudget !== undefined);
  const deployedThreshold = Number(evaluate(main, threshold));
  const deployedBudget = Number(evaluate(main, givenBudget));
  assert.ok(deployedThreshold < deployedBudget, "the alert fires before admissions run out of budget");
  const runThreshold = (Number(runSettings.GMSA_ADMISSION_BUDGET_MS) * deployedThreshold) / deployedBudget;
  run.api.state.delayMs = 5_000;
  const [slow] = entries(await run.admit("validate"));
  assert.ok(Number(slow?.[f("latencyMs")]) > runThreshold, `${JSON.stringify(slow)} against ${runThreshold} ms`);
  run.reset();
  const [fast] = entries(await run.admit("validate"));
  assert.ok(Number(fast?.[f("latencyMs")]) < runThreshold, JSON.stringify(fast));
});

Alerts("denial-spike: each refused pod writes a line with the decision the alert selects", async ({ run, file }) => {
  const minimum = Number(valueOf(file, "denialSpikeMinimum"));
  const denied = String(valueOf(file, "decisionDenied"));
  run.api.state.grants.clear();
  const written = entries((await run.admitTogether(Array.from({ length: minimum }, () => "validate" as const))).flat());
  assert.is(written.filter((entry) => entry[f("decision")] === denied).length, minimum);
});

Alerts("hard-down: a cluster whose every admission fails writes error lines, however few; one decided admission is enough to stay quiet", async ({ run, file }) => {
  const errors = Number(valueOf(file, "hardDownErrors"));
  run.api.state.failWith = 500;
  const failed = entries((await run.admitTogether(Array.from({ length: errors }, (_, i) => (i % 2 === 0 ? "mutate" : "validate")))).flat());
  assert.equal(
    failed.map((entry) => entry[f("decision")]),
    failed.map(() => "error"),
  );
  assert.is(failed.length, errors, "each admission wrote its line");
  run.reset();
  const [decided] = entries(await run.admit("validate"));
  assert.is.not(decided?.[f("decision")], "error");
  assert.match(String(valueOf(file, "hardDownAlertQuery")), "Decided = sumif(ItemCount, Decision != ");
});

Alerts("the alerts split by cluster: every line names its cluster, a single-cluster app's as default, whatever the outcome", async ({ run }) => {
  const lines: WrittenLine[] = [...(await run.admit("mutate"))];
  run.api.state.failWith = 500;
  lines.push(...(await run.admit("validate")));
  const written = entries(lines);
  assert.equal(written.map((entry) => entry[f("decision")]), ["patched", "error"]);
  assert.equal(written.map((entry) => entry[f("cluster")]), ["default", "default"]);
});

Compile.run();
Fields.run();
Alerts.run();
