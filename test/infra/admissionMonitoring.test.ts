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

const logSchemaPath = join(repoRoot, "lib", "observability", "admission-log.json");

interface LogSchema {
  event: string;
  fields: Record<string, string>;
  decisions: string[];
}

const schema = JSON.parse(readFileSync(logSchemaPath, "utf8")) as LogSchema;

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
  "noTrafficAlertQuery",
];

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

/** The strings KQL is built from: the base query and every query variable. */
function kqlStrings(file: BicepFile): Node[] {
  return ["admissions", ...queryVariables].flatMap((name) => {
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

monitoring("the schema is loaded with loadJsonContent from lib/observability/admission-log.json, once", async ({ file }) => {
  const loads: string[] = [];
  for (const infra of (await loadInfra()).values()) {
    for (const call of descendants(infra.root, "call_expression")) {
      if (callName(call) !== "loadJsonContent") continue;
      const path = literal(callArguments(call)[0]);
      assert.ok(path !== undefined, `${infra.path}: loadJsonContent needs a literal path`);
      assert.is(resolve(dirname(infra.absolutePath), path), logSchemaPath, infra.path);
      loads.push(infra.path);
    }
  }
  assert.equal(loads, [file.path]);
  assert.is(declared(file, "var", "admissionLog").value?.text, "loadJsonContent('../../lib/observability/admission-log.json')");
});

monitoring("no KQL hides outside the query variables", ({ file }) => {
  const known = new Set(kqlStrings(file).map((node) => node.id));
  const stray = descendants(file.root, "string").filter(
    (node) => !known.has(node.id) && /parse_json|entry\[|\|\s*(where|summarize|extend|project)\b/.test(literalText(node)),
  );
  assert.equal(stray.map((node) => node.startPosition.row + 1), []);
});

monitoring("KQL text names no log field, event or decision itself: every one comes from the schema", ({ file }) => {
  const strings = kqlStrings(file);
  assert.ok(strings.length >= queryVariables.length, `only ${strings.length} KQL strings found`);
  const forbidden = new Set([...Object.values(schema.fields), schema.event]);
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
      assert.ok(path !== undefined && path.length === 2 && path[0] === "field", `entry[${next.expression.text}]`);
      assert.ok(path[1] !== undefined && path[1] in schema.fields, `${path[1]} is not a field of the schema`);
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
    assert.ok(query.startsWith(base), `${name} does not start from the admissions base`);
  }
});

monitoring("renaming the schema renames every query (code and queries cannot drift)", ({ file }) => {
  const renamed = renamedSchema();
  const options = { bindings, loadJson: (): Value => renamed as unknown as Value };
  for (const name of queryVariables) {
    const query = String(valueOf(file, name, options));
    for (const [key, original] of Object.entries(schema.fields)) {
      assert.not.ok(query.includes(`entry["${original}"]`), `${name} still reads ${original}`);
      if (String(valueOf(file, name, { bindings })).includes(`entry["${original}"]`)) {
        assert.ok(query.includes(`entry["${renamed.fields[key]}"]`), `${name} does not follow ${key}`);
      }
    }
    assert.ok(query.includes(`== "${renamed.event}"`), `${name} does not follow the event name`);
  }
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
  assert.equal(
    [...queries.keys()].sort(),
    ["admissions-by-cluster", "admissions-per-minute", "api-errors-by-cluster", "api-server", "cache", "cold-starts", "denials", "errors-by-cluster", "fleet-overview", "latency", "latency-by-cluster"],
  );
  for (const [name, item] of queries) {
    assert.ok(item.query?.includes("parse_json(message)"), `${name} does not read the admission line`);
    assert.ok(item.title !== undefined && item.title.length > 0, `${name} has no title`);
  }
  assert.match(queries.get("latency")?.query ?? "", /percentilesw\(LatencyMs, ItemCount, 50, 95, 99\)/);
  assert.match(queries.get("denials")?.query ?? "", /by Cluster, Reason, Namespace/);
  for (const name of ["admissions-by-cluster", "errors-by-cluster", "latency-by-cluster", "api-errors-by-cluster"]) {
    assert.match(queries.get(name)?.query ?? "", /\n\| summarize .* by Cluster, bin\(timestamp, 5m\)$/, `${name} draws one line per cluster`);
  }
  assert.match(queries.get("fleet-overview")?.query ?? "", /by Cluster\n[\s\S]*\| project Cluster, Admissions, Denied, Errors, ErrorRatePercent, P95, ApiErrors, LastAdmission\n/);
  assert.is(content.items.findIndex((item) => item.name === "fleet-overview"), content.items.findIndex((item) => item.type === 3), "the fleet overview is the first chart");
  assert.match(queries.get("admissions-per-minute")?.query ?? "", /by Decision, bin\(timestamp, 1m\)/);
});

portal("five log alert rules, each per cluster: API server failing or unreachable, latency near the timeout, error rate, denial spike, no traffic", ({ file }) => {
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  assert.ok(alerts !== undefined);
  assert.is(alerts.body?.loop?.childForFieldName("initializer")?.text, "rule");
  assert.is(literal(property(bodyOf(alerts), "kind")), "LogAlert");
  assert.is(property(bodyOf(alerts), "properties", "scopes")?.text.replace(/\s+/g, " "), "[ appInsightsId ]");
  const rules = valueOf(file, "alertRules", { bindings }) as readonly Record<string, Value>[];
  assert.equal(
    rules.map((rule) => rule["name"]),
    ["api-server-errors", "latency-near-timeout", "error-rate", "denial-spike", "no-traffic"],
  );
  const byName = new Map(rules.map((rule) => [String(rule["name"]), String(rule["query"])]));
  assert.match(byName.get("api-server-errors") ?? "", /where Decision == "error" and ApiErrors > 0\n\| summarize Refused = sum\(ItemCount\) by Cluster\n\| where Refused >= 5$/);
  assert.match(byName.get("error-rate") ?? "", /summarize Errors = sumif\(ItemCount, Decision == "error"\), Admissions = sum\(ItemCount\) by Cluster\n\| where Admissions >= 10 and 100\.0 \* Errors \/ Admissions > 5$/);
  assert.match(byName.get("latency-near-timeout") ?? "", /percentilew\(LatencyMs, ItemCount, 95\)[\s\S]*P95 > 4000$/);
  assert.match(byName.get("denial-spike") ?? "", /ago\(10m\)[\s\S]*Recent >= 20/);
  assert.match(byName.get("no-traffic") ?? "", /Recent == 0 and Earlier >= 30$/);
  const criteria = property(bodyOf(alerts), "properties", "criteria");
  assert.ok(criteria?.text.includes("query: rule.query"));
});

portal("every alert splits by cluster: its query ends in one row per cluster and the rule names Cluster as its dimension", ({ file }) => {
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  const allOf = property(bodyOf(alerts!), "properties", "criteria", "allOf")!;
  const rules = valueOf(file, "alertRules", { bindings }) as readonly Record<string, Value>[];
  for (const rule of rules) {
    const [criterion] = evaluate(file, allOf, { bindings: { ...bindings, rule } }) as readonly Record<string, Value>[];
    assert.equal(criterion?.["dimensions"], [{ name: "Cluster", operator: "Include", values: ["*"] }], String(rule["name"]));
    const summaries = String(rule["query"]).split("\n").filter((line) => line.startsWith("| summarize "));
    assert.match(summaries.at(-1) ?? "", / by Cluster$/, `${String(rule["name"])}: its rows are clusters`);
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

portal("the action group mails the optional address, and every alert uses it", ({ file }) => {
  const [group] = resourcesOfType(file, "Microsoft.Insights/actionGroups");
  assert.ok(group !== undefined);
  const receivers = property(bodyOf(group), "properties", "emailReceivers")!;
  assert.equal(evaluate(file, receivers, { bindings }), []);
  const one = evaluate(file, receivers, { bindings: { ...bindings, alertEmail: "ops@example.com" } }) as readonly Record<string, Value>[];
  assert.is(one.length, 1);
  assert.is(one[0]?.["emailAddress"], "ops@example.com");
  const [alerts] = resourcesOfType(file, "Microsoft.Insights/scheduledQueryRules");
  assert.ok(property(alerts ? bodyOf(alerts) : undefined, "properties", "actions", "actionGroups")?.text.includes("actionGroup.id"));
});

monitoring.run();
portal.run();
