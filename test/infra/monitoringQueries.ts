import { dirname, relative, resolve } from "node:path";
import type { Node } from "web-tree-sitter";
import {
  type BicepFile,
  type Declaration,
  type Value,
  NotStatic,
  declarationsOf,
  evaluate,
  kids,
  loadInfra,
  property,
  repoRoot,
  resourcesOfType,
} from "./bicepTree.js";

/**
 * Every KQL query the infrastructure deploys, as Azure receives it: workbook items (from the
 * serialized workbook) and log alert criteria (one per element of a rule loop), with Bicep's
 * string interpolation resolved. Parameters take the value their caller passes when that is
 * known at compile time (main.bicep's latency threshold), otherwise a placeholder of their type.
 */
export type QueryScope = "applicationInsights" | "workspace";

export interface DeployedQuery {
  /** `file: resource item` or `file: alert rule`, to name the query in a failure. */
  readonly name: string;
  readonly file: string;
  readonly kind: "workbook" | "alert";
  readonly scope: QueryScope;
  readonly text: string;
}

const workbookType = "Microsoft.Insights/workbooks";
const alertType = "Microsoft.Insights/scheduledQueryRules";

function scopeOfResourceType(resourceType: string): QueryScope {
  const lower = resourceType.toLowerCase();
  if (lower === "microsoft.insights/components") return "applicationInsights";
  if (lower === "microsoft.operationalinsights/workspaces") return "workspace";
  throw new Error(`a query runs on ${resourceType}, whose tables are not declared here`);
}

function isRecord(value: Value | undefined): value is { readonly [key: string]: Value } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Azure Verified Modules this infrastructure uses, by registry path: the type of what they deploy. */
const registryModuleTypes: Record<string, string> = {
  "avm/res/operational-insights/workspace": "Microsoft.OperationalInsights/workspaces",
};

/**
 * The resource type behind an ID a caller passes: `resource.id`, or `module.outputs.name` where
 * the module's output is `resource.id`. Resource IDs are only known in Azure, but their type is
 * known here, and it says which tables a query scoped to that resource sees.
 */
function resourceTypeOfId(file: BicepFile, expression: string, infra: Map<string, BicepFile>): string | undefined {
  const direct = /^([A-Za-z_][A-Za-z0-9_]*)\.id$/.exec(expression);
  if (direct) return declarationsOf(file, "resource").get(direct[1]!)?.target?.split("@")[0];
  const output = /^([A-Za-z_][A-Za-z0-9_]*)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)$/.exec(expression);
  const module = output ? declarationsOf(file, "module").get(output[1]!) : undefined;
  if (output === null || module?.target === undefined) return undefined;
  // A registry module's resource ID output: the type its path names.
  const registry = Object.entries(registryModuleTypes).find(([path]) => module.target!.startsWith(`br/public:${path}:`));
  if (registry && output[2] === "resourceId") return registry[1];
  const callee = infra.get(relative(repoRoot, resolve(dirname(file.absolutePath), module.target)).split("\\").join("/"));
  const value = callee ? declarationsOf(callee, "output").get(output[2]!)?.value : undefined;
  return callee && value ? resourceTypeOfId(callee, value.text, infra) : undefined;
}

/** Values for a file's parameters: its caller's, when static, or a placeholder of the declared type. */
export function parameterBindings(file: BicepFile, infra: Map<string, BicepFile>): Record<string, Value> {
  const bindings: Record<string, Value> = {};
  const callers = [...infra.values()].flatMap((caller) =>
    [...declarationsOf(caller, "module").values()]
      .filter((module) => module.target !== undefined && resolve(dirname(caller.absolutePath), module.target) === file.absolutePath)
      .map((module) => ({ caller, module })),
  );
  for (const parameter of declarationsOf(file, "param").values()) {
    if (parameter.value !== undefined) continue;
    let bound: Value | undefined;
    for (const { caller, module } of callers) {
      const passed = property(module.body?.object, "params", parameter.name);
      if (passed === undefined) continue;
      try {
        bound = evaluate(caller, passed);
      } catch (error) {
        if (!(error instanceof NotStatic)) throw error;
        const resourceType = resourceTypeOfId(caller, passed.text, infra);
        if (resourceType !== undefined) {
          bound = `/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-example/providers/${resourceType}/${parameter.name}`;
        }
      }
    }
    bindings[parameter.name] = bound ?? placeholder(parameter);
  }
  return bindings;
}

function placeholder(parameter: Declaration): Value {
  switch (parameter.type) {
    case "string":
      return `example-${parameter.name}`;
    case "object":
      return {};
    case "array":
      return [];
    case "bool":
      return false;
    default:
      throw new Error(`${parameter.name} (${parameter.type ?? "untyped"}) needs a value known at compile time to render the queries`);
  }
}

/** Workbook items and parameters that run a query, at any depth (groups nest items). */
function workbookQueries(content: Value, at: string): { item: string; query: string; resourceType: string }[] {
  if (Array.isArray(content)) return content.flatMap((entry: Value) => workbookQueries(entry, at));
  if (!isRecord(content)) return [];
  const found: { item: string; query: string; resourceType: string }[] = [];
  const inner = content["content"];
  const isParameter = content["version"] === "KqlParameterItem/1.0" && typeof content["query"] === "string";
  const runs = isRecord(inner) && typeof inner["query"] === "string" ? inner : isParameter ? content : undefined;
  if (runs !== undefined) {
    const resourceType = runs["resourceType"];
    if (typeof resourceType !== "string") throw new Error(`${at}: workbook item ${String(content["name"])} has a query but no resourceType`);
    found.push({ item: String(content["name"]), query: String(runs["query"]), resourceType });
  }
  return [...found, ...Object.values(content).flatMap((value) => workbookQueries(value, at))];
}

/**
 * The workbook's parameters as the portal substitutes them before a query runs, with a value of
 * each parameter's kind: a time range's start, end and grain; every cluster ('*'); an empty text.
 * A `{name}` the workbook does not declare is an error: the portal would leave it in the query.
 */
function withParameters(query: string, content: Value, at: string): string {
  const declared = new Map<string, number>();
  const collect = (value: Value): void => {
    if (Array.isArray(value)) return value.forEach(collect);
    if (!isRecord(value)) return;
    if (value["version"] === "KqlParameterItem/1.0" && typeof value["name"] === "string" && typeof value["type"] === "number") declared.set(value["name"], value["type"]);
    Object.values(value).forEach(collect);
  };
  collect(content);
  return query.replace(/\{([A-Za-z][A-Za-z0-9]*)(?::([a-z]+))?\}/g, (token, name: string, part: string | undefined) => {
    const type = declared.get(name);
    if (type === 4 && part === "start") return "datetime(2026-01-01T00:00:00Z)";
    if (type === 4 && part === "end") return "datetime(2026-01-01T04:00:00Z)";
    if (type === 4 && part === "grain") return "5m";
    if (type === 2 && part === undefined) return "'*'";
    if (type === 1 && part === undefined) return "";
    throw new Error(`${at}: ${token} is no parameter the workbook declares (or not a part of one this check knows)`);
  });
}

function workbookResourceQueries(file: BicepFile, workbook: Declaration, bindings: Record<string, Value>): DeployedQuery[] {
  const serialized = property(workbook.body?.object, "properties", "serializedData");
  if (serialized === undefined) throw new Error(`${file.path}: workbook ${workbook.name} has no serializedData`);
  const content: Value = JSON.parse(String(evaluate(file, serialized, { bindings })));
  const at = `${file.path}: ${workbook.name}`;
  return workbookQueries(content, at).map(({ item, query, resourceType }) => ({
    name: `${file.path}: workbook ${workbook.name}, item ${item}`,
    file: file.path,
    kind: "workbook",
    scope: scopeOfResourceType(resourceType),
    text: withParameters(query, content, `${at}, item ${item}`),
  }));
}

/** The rule's scopes say which tables it sees; here they must be one kind of resource. */
function alertScope(file: BicepFile, scopes: Node | undefined, bindings: Record<string, Value>): QueryScope {
  if (scopes === undefined) throw new Error(`${file.path}: an alert rule without scopes`);
  const values = evaluate(file, scopes, { bindings });
  if (!Array.isArray(values) || values.length === 0) throw new Error(`${file.path}: an alert rule with no scope`);
  const types = new Set(values.map((id: Value) => /\/providers\/([^/]+\/[^/]+)\/[^/]+$/i.exec(String(id))?.[1] ?? `an unknown resource (${String(id)})`));
  if (types.size !== 1) throw new Error(`${file.path}: an alert rule over several kinds of resource`);
  return scopeOfResourceType([...types][0]!);
}

function alertResourceQueries(file: BicepFile, alert: Declaration, bindings: Record<string, Value>): DeployedQuery[] {
  const body = alert.body;
  if (body === undefined) throw new Error(`${file.path}: alert ${alert.name} has no body`);
  const instances: Record<string, Value>[] = [{}];
  if (body.loop !== undefined) {
    const loop = body.loop;
    const variable = loop.childForFieldName("initializer");
    const bodyNode = loop.childForFieldName("body");
    const iterable = kids(loop).find((child) => child.id !== variable?.id && child.id !== bodyNode?.id && child.type !== "for_loop_parameters");
    if (variable === null || iterable === undefined) throw new Error(`${file.path}: alert ${alert.name} loops in a form this reader does not know`);
    const items = evaluate(file, iterable, { bindings });
    if (!Array.isArray(items)) throw new Error(`${file.path}: alert ${alert.name} loops over a non-array`);
    instances.length = 0;
    for (const item of items) instances.push({ [variable.text]: item });
  }
  return instances.flatMap((loopBindings, index) => {
    const scope = { ...bindings, ...loopBindings };
    const properties = property(body.object, "properties");
    const displayName = property(properties, "displayName");
    const label = displayName ? String(evaluate(file, displayName, { bindings: scope })) : `${alert.name}[${index}]`;
    const criteria = property(properties, "criteria", "allOf");
    if (criteria === undefined) throw new Error(`${file.path}: alert ${label} has no criteria`);
    const all = evaluate(file, criteria, { bindings: scope });
    if (!Array.isArray(all)) throw new Error(`${file.path}: alert ${label}: allOf is not an array`);
    const tables = alertScope(file, property(properties, "scopes"), scope);
    return all.map((criterion: Value, position: number) => {
      const query = isRecord(criterion) ? criterion["query"] : undefined;
      if (typeof query !== "string") throw new Error(`${file.path}: alert ${label}, criterion ${position} has no query`);
      return { name: `${file.path}: alert "${label}"`, file: file.path, kind: "alert" as const, scope: tables, text: query };
    });
  });
}

/** Every deployed query under infra/. */
/**
 * `overrides` sets parameters of the files that declare them, whatever their callers pass: an
 * opt-in feature's queries (the audit's alert) are compiled as they deploy when it is on.
 */
export async function deployedQueries(overrides: Readonly<Record<string, Value>> = {}): Promise<DeployedQuery[]> {
  const infra = await loadInfra();
  const queries: DeployedQuery[] = [];
  for (const file of infra.values()) {
    const workbooks = resourcesOfType(file, workbookType);
    const alerts = resourcesOfType(file, alertType);
    if (workbooks.length === 0 && alerts.length === 0) continue;
    const declared = declarationsOf(file, "param");
    const bindings = { ...parameterBindings(file, infra), ...Object.fromEntries(Object.entries(overrides).filter(([name]) => declared.has(name))) };
    for (const workbook of workbooks) queries.push(...workbookResourceQueries(file, workbook, bindings));
    for (const alert of alerts) queries.push(...alertResourceQueries(file, alert, bindings));
  }
  return queries;
}

/** The workbook's charts and tables, by item name, sorted: the admission monitoring's whole view. */
export const workbookCharts = [
  "admissions-by-cluster",
  "admissions-per-minute",
  "api-errors-by-cluster",
  "api-server",
  "cache",
  "canary",
  "cold-starts",
  "correlation-search",
  "credspec-cache-state",
  "credspec-cache-trouble",
  "credspec-changes",
  "credspec-findings-by-kind",
  "credspec-health",
  "denials",
  "errors-by-cluster",
  "fleet-overview",
  "latency",
  "latency-by-cluster",
  "recent-failures",
  "request-latency",
];
