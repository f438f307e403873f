import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { Node } from "web-tree-sitter";
import {
  type BicepFile,
  type Declaration,
  type Value,
  callArguments,
  callName,
  declared,
  declarationsOf,
  decorator,
  descendants,
  evaluate,
  infraFile,
  literal,
  loadInfra,
  memberPath,
  property,
  repoRoot,
  resourcesOfType,
  stringParts,
  valueOf,
} from "./bicepTree.js";
import { webhookRoutes } from "../../lib/app/webhooks.js";
import { workbookCharts } from "./monitoringQueries.js";

const logSchemaPath = join(repoRoot, "lib", "observability", "admission-log.json");
const canarySchemaPath = join(repoRoot, "lib", "observability", "canary-log.json");
const clusterEventsPath = join(repoRoot, "lib", "observability", "cluster-events.json");
const cacheEventsPath = join(repoRoot, "lib", "observability", "cache-events.json");
const cacheEventsSchema = JSON.parse(readFileSync(cacheEventsPath, "utf8")) as { event: string; fields: Record<string, string> };
const auditLogPath = join(repoRoot, "lib", "observability", "audit-log.json");
const auditSchema = JSON.parse(readFileSync(auditLogPath, "utf8")) as { finding: string; summary: string; audited: string; errorSeverity: string; fields: Record<string, string> };

interface LogSchema {
  event: string;
  fields: Record<string, string>;
  decisions: string[];
}

const schema = JSON.parse(readFileSync(logSchemaPath, "utf8")) as LogSchema;
const canarySchema = JSON.parse(readFileSync(canarySchemaPath, "utf8")) as { event: string; fields: Record<string, string>; ready: string };
const clusterEventsSchema = JSON.parse(readFileSync(clusterEventsPath, "utf8")) as { unavailable: string; secretRefused: string; requestRefused: string; fields: Record<string, string> };

const bindings = {
  appInsightsId: "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Insights/components/appi-test",
  environmentName: "test",
  location: "westeurope",
  tags: {},
  latencyAlertThresholdMs: 4000,
  alertEmail: "",
};

const queryVariables = [
  "admissionsPerMinuteQuery",
  "denialsQuery",
  "latencyQuery",
  "apiServerQuery",
  "cacheQuery",
  "coldStartQuery",
  "fleetOverviewQuery",
  "admissionsByClusterQuery",
  "errorsByClusterQuery",
  "latencyByClusterQuery",
  "apiErrorsByClusterQuery",
  "apiErrorAlertQuery",
  "latencyAlertQuery",
  "errorRateAlertQuery",
  "denialSpikeAlertQuery",
  "hardDownAlertQuery",
];

/** The queries over the canary's lines and the cluster events, and what they are built from. */
const otherQueryVariables = [
  "canaryHeartbeatAlertQuery",
  "canaryFleetAlertQuery",
  "canaryQuery",
  "clusterUnavailableAlertQuery",
  "clusterSecretRefusedAlertQuery",
  "functionErrorsAlertQuery",
  "recentFailuresQuery",
];
const otherBases = ["canaries", "clusterEventLines", "canaryStatus", "canaryClusterTable", "chosen", "admissionsChosen", "series", "cacheLines", "caExpiryAlertQuery"];
const cacheQueryVariables = ["cacheTroubleQuery", "cacheStateQuery"];
/** The credential spec audit's queries, and the bases they are built from. */
const auditQueryVariables = ["auditFindings", "auditSummaries", "auditRuns", "auditChanges", "auditHealthQuery", "auditFindingsByKindQuery", "auditChangesQuery", "auditErrorsAlertQuery"];
/** Queries over more than the admission line, or none of the app's lines: the host's requests, a text search, the cluster choices. */
const unionQueryVariables = ["fleetOverviewQuery", "coldStartQuery", "clusterChoicesQuery"];
const unparsedQueryVariables = ["requestLatencyQuery", "correlationQuery"];
/** Queries over another system's log (the API server's), whose words are its own, not the app's schema. */
const foreignQueryVariables = ["apiServerWebhookCallsQuery"];

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

/** The strings KQL is built from: the base query and every query variable. */
function kqlStrings(file: BicepFile, options: { foreign?: boolean } = {}): Node[] {
  const names = ["admissions", ...queryVariables, ...otherBases, ...otherQueryVariables, "clusterChoicesQuery", ...unparsedQueryVariables, ...cacheQueryVariables, ...auditQueryVariables];
  return [...names, ...(options.foreign ? foreignQueryVariables : [])].flatMap((name) => {
    const value = declared(file, "var", name).value;
    if (value === undefined) throw new Error(`${name} has no value`);
    return value.type === "string" ? [value, ...descendants(value, "string")] : descendants(value, "string");
  });
}

function literalText(node: Node): string {
  return stringParts(node)
    .map((part) => ("text" in part ? part.text : ""))
    .join("");
}

/** Identifier-like words, dotted ones both whole and split (`gmsa.admission`, `e.reason`). */
function words(text: string): Set<string> {
  const dotted = text.match(/[A-Za-z_][A-Za-z0-9_.]*/g) ?? [];
  return new Set(dotted.flatMap((word) => [word, ...word.split(".")]));
}

/** The same schema with every name changed, to show the queries follow the file. */
function renamedSchema(): LogSchema {
  return {
    event: `${schema.event}.renamed`,
    fields: Object.fromEntries(Object.entries(schema.fields).map(([key, name]) => [key, `x_${name}`])),
    decisions: schema.decisions,
  };
}

const monitoring = suite<{ file: BicepFile }>("admission monitoring reads the log schema");

monitoring.before(async (context) => {
  context.file = await infraFile("infra/modules/admission-monitoring.bicep");
});

monitoring("the schemas are loaded with loadJsonContent from lib/observability/, each once", async ({ file }) => {
  const loads: string[] = [];
  const paths: string[] = [];
  for (const infra of (await loadInfra()).values()) {
    for (const call of descendants(infra.root, "call_expression")) {
      if (callName(call) !== "loadJsonContent") continue;
      const path = literal(callArguments(call)[0]);
      assert.ok(path !== undefined, `${infra.path}: loadJsonContent needs a literal path`);
      paths.push(resolve(dirname(infra.absolutePath), path));
      loads.push(infra.path);
    }
  }
  assert.equal(loads, [file.path, file.path, file.path, file.path, file.path]);
  assert.equal(paths.sort(), [logSchemaPath, canarySchemaPath, clusterEventsPath, cacheEventsPath, auditLogPath].sort());
  assert.is(declared(file, "var", "admissionLog").value?.text, "loadJsonContent('../../lib/observability/admission-log.json')");
});

monitoring("no KQL hides outside the query variables", ({ file }) => {
  const known = new Set(kqlStrings(file, { foreign: true }).map((node) => node.id));
  const stray = descendants(file.root, "string").filter(
    (node) => !known.has(node.id) && /parse_json|entry\[|\|\s*(where|summarize|extend|project)\b/.test(literalText(node)),
  );
  assert.equal(stray.map((node) => node.startPosition.row + 1), []);
});

monitoring("KQL text names no log field, event or decision itself: every one comes from the schema", ({ file }) => {
  const strings = kqlStrings(file);
  assert.ok(strings.length >= queryVariables.length, `only ${strings.length} KQL strings found`);
  const forbidden = new Set([
    ...Object.values(schema.fields),
    schema.event,
    ...Object.values(canarySchema.fields),
    canarySchema.event,
    canarySchema.ready,
    ...Object.values(clusterEventsSchema.fields),
    clusterEventsSchema.unavailable,
    clusterEventsSchema.secretRefused,
    clusterEventsSchema.requestRefused,
    auditSchema.finding,
    auditSchema.summary,
    auditSchema.audited,
  ]);
  for (const node of strings) {
    for (const part of stringParts(node)) {
      if (!("text" in part)) continue;
      for (const word of words(part.text)) {
        assert.not.ok(forbidden.has(word), `literal "${word}" in KQL at line ${node.startPosition.row + 1}`);
      }
      for (const decision of schema.decisions) {
        assert.not.ok(part.text.includes(`"${decision}"`) || part.text.includes(`'${decision}'`), `literal decision ${decision}`);
      }
    }
  }
});

monitoring("every field read from the parsed message is an interpolated schema field", ({ file }) => {
  let reads = 0;
  for (const node of kqlStrings(file)) {
    const parts = stringParts(node);
    parts.forEach((part, index) => {
      if (!("text" in part) || !/entry\[["']?$/.test(part.text)) return;
      const next = parts[index + 1];
      assert.ok(next !== undefined && "expression" in next, `entry[...] without a schema field at line ${node.startPosition.row + 1}`);
      const path = memberPath(next.expression);
      const fieldsOf: Record<string, Record<string, string>> = {
        field: schema.fields,
        "canaryLog.fields": canarySchema.fields,
        "clusterEvents.fields": clusterEventsSchema.fields,
        "cacheEvents.fields": cacheEventsSchema.fields,
        "auditLog.fields": auditSchema.fields,
      };
      const holder = path === undefined ? undefined : fieldsOf[path.slice(0, -1).join(".")];
      assert.ok(holder !== undefined, `entry[${next.expression.text}] does not read a schema's field`);
      assert.ok(path!.at(-1)! in holder, `${path!.at(-1)} is not a field of its schema`);
      reads += 1;
    });
  }
  assert.ok(reads >= 10, `only ${reads} field reads`);
  assert.is(declared(file, "var", "field").value?.text, "admissionLog.fields");
});

monitoring("decision values used by the queries are decisions the schema lists", ({ file }) => {
  const decisionVariables = [...descendants(file.root, "variable_declaration")]
    .map((node) => node.namedChildren[0]?.text ?? "")
    .filter((name) => /^decision[A-Z]/.test(name));
  assert.ok(decisionVariables.length >= 1);
  for (const name of decisionVariables) {
    assert.ok(schema.decisions.includes(String(valueOf(file, name))), `${name} is not a schema decision`);
  }
});

monitoring("the rendered queries parse the message and read the fields the views need", ({ file }) => {
  const base = String(valueOf(file, "admissions"));
  assert.match(base, /^traces\n/);
  assert.ok(base.includes("parse_json(message)"));
  assert.ok(base.includes(`== "${schema.event}"`));
  for (const key of ["event", "cluster", "decision", "reason", "namespace", "latencyMs", "apiCalls", "apiErrors", "cacheHits", "cacheMisses", "coldStart"]) {
    const name = schema.fields[key];
    assert.ok(name !== undefined && base.includes(`entry["${name}"]`), `the base query does not read ${key}`);
  }
  for (const name of queryVariables) {
    const query = String(valueOf(file, name, { bindings }));
    if (unionQueryVariables.includes(name)) assert.ok(query.includes(base), `${name} does not read the admissions base`);
    else assert.ok(query.startsWith(base), `${name} does not start from the admissions base`);
  }
  const canaries = String(valueOf(file, "canaries"));
  assert.ok(canaries.includes(`== "${canarySchema.event}"`));
  for (const name of ["canaryHeartbeatAlertQuery", "canaryFleetAlertQuery", "canaryQuery"]) {
    const query = String(valueOf(file, name, { bindings }));
    assert.ok(query.startsWith(`let runs = ${canaries};`), `${name} does not read the canary's lines`);
    assert.ok(query.includes('let perCluster = datatable(Cluster: string) ["default"]'), `${name} does not start from the configured clusters`);
  }
  const events = String(valueOf(file, "clusterEventLines"));
  for (const name of ["clusterUnavailableAlertQuery", "clusterSecretRefusedAlertQuery", "functionErrorsAlertQuery"]) assert.ok(String(valueOf(file, name, { bindings })).startsWith(events), name);
  const recent = String(valueOf(file, "recentFailuresQuery", { bindings }));
  assert.ok(recent.includes(base) && recent.includes(events), "recent failures: failed admissions and refused requests together");
});

monitoring("renaming the schema renames every query (code and queries cannot drift)", ({ file }) => {
  const renamed = renamedSchema();
  const options = { bindings, loadJson: (path: string): Value => (path === logSchemaPath ? (renamed as unknown as Value) : (JSON.parse(readFileSync(path, "utf8")) as Value)) };
  for (const name of queryVariables) {
    const query = String(valueOf(file, name, options));
    for (const [key, original] of Object.entries(schema.fields)) {
      // (The fleet table also reads the canary's and the cluster events' lines, whose fields share some names.)
      if (name !== "fleetOverviewQuery") assert.not.ok(query.includes(`entry["${original}"]`), `${name} still reads ${original}`);
      if (String(valueOf(file, name, { bindings })).includes(`entry["${original}"]`)) {
        assert.ok(query.includes(`entry["${renamed.fields[key]}"]`), `${name} does not follow ${key}`);
      }
    }
    assert.ok(query.includes(`== "${renamed.event}"`), `${name} does not follow the event name`);
  }
});

monitoring("renaming the canary's and the cluster events' fields renames their queries", ({ file }) => {
  const renamedCanary = { event: "gmsa.canary.renamed", ready: "ready.renamed", fields: Object.fromEntries(Object.entries(canarySchema.fields).map(([key, name]) => [key, `x_${name}`])) };
  const renamedEvents = {
    unavailable: "u.renamed",
    secretRefused: "s.renamed",
    requestRefused: "r.renamed",
    fields: Object.fromEntries(Object.entries(clusterEventsSchema.fields).map(([key, name]) => [key, `x_${name}`])),
  };
  const loadJson = (path: string): Value =>
    (path === canarySchemaPath ? renamedCanary : path === clusterEventsPath ? renamedEvents : JSON.parse(readFileSync(path, "utf8"))) as Value;
  // (recentFailuresQuery also reads the admission line, whose fields share some names: left out.)
  for (const name of otherQueryVariables.filter((name) => name !== "recentFailuresQuery")) {
    const query = String(valueOf(file, name, { bindings, loadJson }));
    for (const original of [...Object.values(canarySchema.fields), ...Object.values(clusterEventsSchema.fields)]) {
      assert.not.ok(query.includes(`entry["${original}"]`), `${name} still reads ${original}`);
    }
    assert.ok(query.includes("gmsa.canary.renamed") || query.includes("u.renamed"), `${name} does not follow the event name`);
  }
  assert.ok(String(valueOf(file, "canaryHeartbeatAlertQuery", { bindings, loadJson })).includes('"ready.renamed"'));
});

const portal = suite<{ file: BicepFile; main: BicepFile }>("workbook and alerts");

portal.before(async (context) => {
  context.file = await infraFile("infra/modules/admission-monitoring.bicep");
  context.main = await infraFile("infra/main.bicep");
});

portal("the workbook is shared, named with guid(), bound to Application Insights, built in Bicep", ({ file }) => {
  const [workbook] = resourcesOfType(file, "Microsoft.Insights/workbooks");
  assert.ok(workbook !== undefined);
  assert.is(callName(property(bodyOf(workbook), "name")!), "guid");
  assert.is(literal(property(bodyOf(workbook), "kind")), "shared");
  assert.is(property(bodyOf(workbook), "properties", "sourceId")?.text, "appInsightsId");
  assert.is(property(bodyOf(workbook), "properties", "serializedData")?.text, "string(workbookContent)");
  const serialized = evaluate(file, property(bodyOf(workbook), "properties", "serializedData")!, { bindings });
  const content = JSON.parse(String(serialized)) as { version: string; items: { type: number; name: string; content: { query?: string; title?: string } }[] };
  assert.is(content.version, "Notebook/1.0");
  const queries = new Map(content.items.filter((item) => item.type === 3).map((item) => [item.name, item.content]));
  assert.equal([...queries.keys()].sort(), workbookCharts);
  const linesNotParsed = ["correlation-search", "request-latency"];
  for (const [name, item] of queries) {
    if (!linesNotParsed.includes(name)) assert.ok(item.query?.includes("parse_json(message)"), `${name} does not read the admission line`);
    assert.ok(item.title !== undefined && item.title.length > 0, `${name} has no title`);
  }
  assert.match(queries.get("latency")?.query ?? "", /percentilesw\(LatencyMs, ItemCount, 50, 95, 99\)/);
  assert.match(queries.get("denials")?.query ?? "", /by Cluster, Webhook, Reason, Namespace/);
  // Silence is drawn as zero over the workbook's range and grain: a cluster that stops writing falls to nothing.
  for (const name of ["admissions-by-cluster", "errors-by-cluster", "api-errors-by-cluster"]) {
    assert.match(queries.get(name)?.query ?? "", /\n\| make-series \w+ = sum\([^)]*\) default=0 on timestamp from \{TimeRange:start\} to \{TimeRange:end\} step \{TimeRange:grain\} by Cluster$/, `${name} draws one series per cluster`);
  }
  assert.match(queries.get("latency-by-cluster")?.query ?? "", /by Cluster, bin\(timestamp, \{TimeRange:grain\}\)$/);
  assert.match(queries.get("admissions-per-minute")?.query ?? "", /strcat\(Webhook, ": ", Decision\)[\s\S]*default=0 .* by Decision$/);
  // Every chart of admission lines keeps the clusters the filter chose.
  for (const [name, item] of queries) {
    if (!linesNotParsed.includes(name)) assert.ok(item.query?.includes('| where "*" in ({Cluster}) or Cluster in ({Cluster})'), `${name} ignores the cluster filter`);
  }
  // The fleet table starts from the configured clusters: one that never wrote a line has its row.
  assert.match(queries.get("fleet-overview")?.query ?? "", /datatable\(Cluster: string\) \[[^\]]+\]\n\| union \(lines \| project Cluster\)\n\| distinct Cluster\n[\s\S]*join kind=leftouter judged on Cluster/);
  assert.match(queries.get("fleet-overview")?.query ?? "", /MinutesSinceLastLine = /);
  assert.match(queries.get("request-latency")?.query ?? "", /^requests\n\| where name matches regex /);
  assert.is(content.items.findIndex((item) => item.name === "fleet-overview"), content.items.findIndex((item) => item.type === 3), "the fleet overview is the first chart");
});

portal("the request-latency chart selects every webhook function's requests and no other function's", () => {
  const source = readFileSync(join(repoRoot, "infra", "modules", "admission-monitoring.bicep"), "utf8");
  const pattern = /var webhookFunctionNames = '@"([^"]+)"'/.exec(source)?.[1];
  assert.ok(pattern, "the pattern of webhook function names");
  const matches = new RegExp(pattern);
  for (const name of webhookRoutes.keys()) assert.ok(matches.test(name), `${name} is a webhook function`);
  for (const other of ["health", "metrics", "info", "canary", "cluster-mutate-x", "validate2"]) assert.not.ok(matches.test(other), `${other} is not`);
});

portal("log alert rules, each per cluster: what blocks pods, what degrades them, and the canary's heartbeat", ({ file }) => {
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  assert.ok(alerts !== undefined);
  assert.is(alerts.body?.loop?.childForFieldName("initializer")?.text, "rule");
  assert.is(literal(property(bodyOf(alerts), "kind")), "LogAlert");
  assert.is(property(bodyOf(alerts), "properties", "scopes")?.text.replace(/\s+/g, " "), "[ appInsightsId ]");
  const rules = valueOf(file, "deployedAlertRules", { bindings }) as readonly Record<string, Value>[];
  assert.equal(
    rules.map((rule) => rule["name"]),
    [
      "api-server-errors",
      "latency-near-timeout",
      "error-rate",
      "denial-spike",
      "hard-down",
      "cluster-unavailable",
      "function-errors",
      "cluster-secret-refused",
      "canary-heartbeat",
      "canary-fleet",
      "webhook-ca-expiring",
    ],
  );
  const without = valueOf(file, "deployedAlertRules", { bindings: { ...bindings, canaryEnabled: false } }) as readonly Record<string, Value>[];
  assert.not.ok(
    without.some((rule) => String(rule["name"]).startsWith("canary-") || rule["name"] === "webhook-ca-expiring"),
    "no canary alert where no canary runs",
  );
  // The audit's rule comes with the audit, which the canary's timer runs.
  const withAudit = valueOf(file, "deployedAlertRules", { bindings: { ...bindings, auditEnabled: true } }) as readonly Record<string, Value>[];
  assert.equal(withAudit.map((rule) => rule["name"]).slice(rules.length), ["credspec-audit-errors"]);
  const auditRule = withAudit.at(-1)!;
  assert.is(auditRule["severity"], 2);
  assert.match(String(auditRule["query"]), /\| where Severity == "error" and Change == "new"\n\| summarize NewErrors = sum\(ItemCount\), Example = .* by Cluster$/);
  assert.not.ok(
    (valueOf(file, "deployedAlertRules", { bindings: { ...bindings, auditEnabled: true, canaryEnabled: false } }) as readonly Record<string, Value>[]).some((rule) => rule["name"] === "credspec-audit-errors"),
    "no audit alert where the timer that audits does not run",
  );
  const byName = new Map(rules.map((rule) => [String(rule["name"]), String(rule["query"])]));
  const severity = new Map(rules.map((rule) => [String(rule["name"]), Number(rule["severity"])]));
  assert.match(byName.get("api-server-errors") ?? "", /where Decision == "error" and ApiErrors > 0\n\| summarize Refused = sum\(ItemCount\) by Cluster\n\| where Refused >= 5$/);
  assert.match(byName.get("error-rate") ?? "", /summarize Errors = sumif\(ItemCount, Decision == "error"\), Admissions = sum\(ItemCount\) by Cluster\n\| where Admissions >= 10 and 100\.0 \* Errors \/ Admissions > 5$/);
  assert.match(byName.get("latency-near-timeout") ?? "", /percentilew\(LatencyMs, ItemCount, 95\)[\s\S]*P95 > 4000$/);
  assert.match(byName.get("denial-spike") ?? "", /ago\(10m\)[\s\S]*Recent >= 20/);
  assert.match(byName.get("hard-down") ?? "", /\| where Errors >= 3 and Decided == 0$/);
  assert.match(byName.get("canary-heartbeat") ?? "", /\| where Ready == 0 and failing < 2\n/);
  assert.match(byName.get("canary-fleet") ?? "", /\| where Ready == 0 and failing >= 2\n/);
  for (const name of ["api-server-errors", "error-rate", "hard-down", "cluster-unavailable", "function-errors", "canary-heartbeat"]) assert.is(severity.get(name), 1, name);
  assert.match(byName.get("function-errors") ?? "", /and Status >= 500\n/);
  assert.is(severity.get("canary-fleet"), 0);
  // The latest reading per cluster, below the threshold: 30 days ahead by default.
  assert.match(byName.get("webhook-ca-expiring") ?? "", /\| summarize arg_max\(timestamp, CaDaysLeft\) by Cluster\n\| where CaDaysLeft < 30\n/);
  assert.is(severity.get("webhook-ca-expiring"), 2);
  const heartbeat = rules.find((rule) => rule["name"] === "canary-heartbeat")!;
  assert.is(heartbeat["windowSize"], "PT20M", "three runs of a five-minute schedule and some");
  const criteria = property(bodyOf(alerts), "properties", "criteria");
  assert.ok(criteria?.text.includes("query: rule.query"));
});

portal("the heartbeat starts from the configured clusters, so a cluster that writes nothing still has a row; main.bicep passes the fleet's names", ({ file, main }) => {
  const fleet = { ...bindings, canaryClusters: ["alpha", "beta"] };
  const query = String(valueOf(file, "canaryHeartbeatAlertQuery", { bindings: fleet }));
  assert.ok(query.includes('let perCluster = datatable(Cluster: string) ["alpha", "beta"]'), query);
  assert.match(query, /join kind=leftouter \(runs/, "clusters without a line keep their row");
  assert.match(query, /Ready = coalesce\(Ready, 0\)/, "no line counts as no ready run");
  const passed = property(declared(main, "module", "admissionMonitoring").body?.object, "params", "canaryClusters");
  assert.ok(passed !== undefined);
  assert.equal(evaluate(main, passed), ["default"]);
  assert.equal(evaluate(main, passed, { bindings: { clusters: [{ name: "alpha", aksResourceId: "x" }, { name: "beta", aksResourceId: "y" }] } }), ["alpha", "beta"]);
});

portal("every alert splits by cluster: its query ends in one row per cluster and the rule names Cluster as its dimension", ({ file }) => {
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  const allOf = property(bodyOf(alerts!), "properties", "criteria", "allOf")!;
  const rules = valueOf(file, "deployedAlertRules", { bindings }) as readonly Record<string, Value>[];
  for (const rule of rules) {
    const [criterion] = evaluate(file, allOf, { bindings: { ...bindings, rule } }) as readonly Record<string, Value>[];
    assert.equal(criterion?.["dimensions"], [{ name: "Cluster", operator: "Include", values: ["*"] }], String(rule["name"]));
    const lines = String(rule["query"]).split("\n");
    const last = lines.filter((line) => /^\| (summarize|project|extend) /.test(line)).at(-1) ?? "";
    assert.match(last, / by Cluster$|^\| project Cluster,|^\| extend Cluster = /, `${String(rule["name"])}: its rows are clusters`);
  }
  assert.match(String(valueOf(file, "admissions")), /, Cluster = tostring\(entry\["cluster"\]\)/, "the column comes from the line's cluster field");
});

portal("the latency alert fires at a share of the admission budget the Function App is given (default 75% of 4000 ms), before admissions time out", ({ main }) => {
  const threshold = property(declared(main, "module", "admissionMonitoring").body?.object, "params", "latencyAlertThresholdMs");
  const givenBudget = property(declared(main, "module", "functionApp").body?.object, "params", "admissionBudgetMs");
  assert.ok(threshold !== undefined);
  assert.ok(givenBudget !== undefined, "main.bicep gives the Function App its admission budget");
  assert.is(evaluate(main, threshold), 3000);
  assert.is(evaluate(main, threshold, { bindings: { admissionBudgetMs: 10000, latencyAlertPercent: 80 } }), 8000);
  const maxValue = decorator(declared(main, "param", "latencyAlertPercent"), "maxValue");
  assert.ok(maxValue !== undefined, "the share is bounded");
  const highest = Number(evaluate(main, callArguments(maxValue)[0]!));
  for (const admissionBudgetMs of [100, 2000, 4000, 29000]) {
    const bindings = { admissionBudgetMs, latencyAlertPercent: highest };
    assert.is(evaluate(main, givenBudget, { bindings }), admissionBudgetMs);
    assert.ok(Number(evaluate(main, threshold, { bindings })) < admissionBudgetMs, `the alert fires below a budget of ${admissionBudgetMs} ms`);
  }
});

portal("the action group exists only with an address to mail; severities 0-1 and 2 reach their own existing groups; every alert links its runbook section", ({ file }) => {
  const [group] = resourcesOfType(file, "Microsoft.Insights/actionGroups");
  assert.ok(group !== undefined);
  assert.match(group.body?.condition?.text ?? "", /^\(?!empty\(alertEmail\)\)?$/);
  const receivers = property(bodyOf(group), "properties", "emailReceivers")!;
  const one = evaluate(file, receivers, { bindings: { ...bindings, alertEmail: "ops@example.com" } }) as readonly Record<string, Value>[];
  assert.is(one.length, 1);
  assert.is(one[0]?.["emailAddress"], "ops@example.com");
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  const actions = property(bodyOf(alerts!), "properties", "actions")!;
  const routed = { ...bindings, criticalActionGroupIds: ["/ag/oncall"], warningActionGroupIds: ["/ag/team"] };
  const of = (severity: number, extra: Record<string, Value> = {}) =>
    evaluate(file, actions, { bindings: { ...routed, ...extra, rule: { name: "x", severity } } }) as Record<string, Value>;
  assert.equal(of(1)["actionGroups"], ["/ag/oncall"]);
  assert.equal(of(0)["actionGroups"], ["/ag/oncall"]);
  assert.equal(of(2)["actionGroups"], ["/ag/team"]);
  assert.equal(of(1)["customProperties"], { runbook: "docs/runbook.md#x" });
  assert.equal(of(2, { runbookUrl: "https://example.com/runbook" })["customProperties"], { runbook: "https://example.com/runbook#x" });
  const warning = declared(file, "output", "alertRoutingWarning").value!;
  assert.match(String(evaluate(file, warning, { bindings })), /No alert reaches anyone/, "no email and no group: the deployment says so");
  assert.is(evaluate(file, warning, { bindings: { ...bindings, alertEmail: "ops@example.com" } }), "");
  assert.is(evaluate(file, warning, { bindings: { ...bindings, criticalActionGroupIds: ["/ag/oncall"] } }), "");
});

portal("adaptive sampling never drops a trace: failures, canary lines and cluster events are all counted", () => {
  const host = JSON.parse(readFileSync(join(repoRoot, "host.json"), "utf8")) as { logging?: { applicationInsights?: { samplingSettings?: { excludedTypes?: string } } } };
  const excluded = (host.logging?.applicationInsights?.samplingSettings?.excludedTypes ?? "").split(";").map((type) => type.trim());
  assert.ok(excluded.includes("Trace"), `excludedTypes: ${excluded.join(";")}`);
});

portal("every deployed alert has its section in docs/runbook.md", ({ file }) => {
  const runbook = readFileSync(join(repoRoot, "docs", "runbook.md"), "utf8");
  const headings = new Set([...runbook.matchAll(/^## (.+)$/gm)].map((match) => match[1]!.trim()));
  // Every opt-in alert deployed: the audit's.
  const rules = valueOf(file, "deployedAlertRules", { bindings: { ...bindings, auditEnabled: true } }) as readonly Record<string, Value>[];
  for (const rule of rules) assert.ok(headings.has(String(rule["name"])), `docs/runbook.md has no section "## ${String(rule["name"])}"`);
  // The opt-in alert on the API server's log is a resource of its own (it reads another workspace's table).
  assert.equal([...headings].filter((heading) => !rules.some((rule) => rule["name"] === heading)), ["api-server-webhook-calls"], "no section for an alert that is not deployed");
});

monitoring.run();
portal.run();

const apiServerView = suite("the API server's own view, opt-in");

apiServerView("off by default; on, every cluster sends its kube-apiserver log to the app's workspace, resource-specific, and the alert reads it there", async () => {
  const main = await infraFile("infra/main.bicep");
  assert.is(evaluate(main, declarationsOf(main, "param").get("apiServerLogs")!.value!), false);
  const single = declarationsOf(main, "module").get("clusterApiServerLogs")!;
  const members = declarationsOf(main, "module").get("memberApiServerLogs")!;
  assert.is(single.target, "modules/api-server-logs.bicep");
  assert.is(members.target, "modules/api-server-logs.bicep");
  assert.match(single.body?.condition?.text ?? "", /^\(apiServerLogs && hasCluster && empty\(clusters\)\)$/);
  assert.is(members.body?.condition?.text, "(apiServerLogs)");
  for (const module of [single, members]) assert.is(property(property(module.body!.object, "params"), "workspaceId")?.text, "monitoring.outputs.workspaceId");

  const logs = await infraFile("infra/modules/api-server-logs.bicep");
  const [setting] = resourcesOfType(logs, "Microsoft.Insights/diagnosticSettings");
  assert.ok(setting);
  assert.is(property(bodyOf(setting), "scope")?.text, "aks");
  assert.is(literal(property(bodyOf(setting), "properties", "logAnalyticsDestinationType")), "Dedicated", "the AKSControlPlane table the alert reads");
  assert.match(property(bodyOf(setting), "properties", "logs")?.text ?? "", /category: 'kube-apiserver'\s+enabled: true/);

  const monitoringFile = await infraFile("infra/modules/admission-monitoring.bicep");
  const alert = declarationsOf(monitoringFile, "resource").get("apiServerWebhookCallsAlert")!;
  assert.is(alert.body?.condition?.text, "(apiServerLogs)");
  assert.is(property(bodyOf(alert), "properties", "scopes")?.text.replace(/\s+/g, " "), "[ workspaceId ]");
  assert.match(readFileSync(join(repoRoot, "docs", "runbook.md"), "utf8"), /^## api-server-webhook-calls$/m, "the alert's runbook section");
});

apiServerView.run();
