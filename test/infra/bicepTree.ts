/**
 * Reads the Bicep under infra/ through a real Bicep grammar (tree-sitter-bicep, run by
 * web-tree-sitter) so the infra tests ask the syntax tree, not regexes over text. The Bicep
 * CLI is not available here; this is the closest offline check: syntax, symbols, module
 * contracts, and a small evaluator for the values that are known at compile time.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join, relative, resolve } from "node:path";
import { Language, Parser, type Node } from "web-tree-sitter";

export const repoRoot = resolve(__dirname, "..", "..");
export const infraDir = join(repoRoot, "infra");

export interface BicepFile {
  /** Path relative to the repository root, with forward slashes. */
  readonly path: string;
  readonly absolutePath: string;
  readonly source: string;
  readonly root: Node;
}

let parserReady: Promise<Parser> | undefined;

function bicepParser(): Promise<Parser> {
  parserReady ??= (async () => {
    await Parser.init();
    const language = await Language.load(require.resolve("tree-sitter-bicep/tree-sitter-bicep.wasm"));
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })();
  return parserReady;
}

/**
 * The grammar predates the `extension` statement (Bicep 0.30), which replaced `provider 'name'`
 * with the same shape: read one as the other, so the rest of the file is still checked.
 */
function withExtensionsAsProviders(source: string): string {
  return source.replace(/^extension(\s+)([A-Za-z_][A-Za-z0-9_]*)\b/gm, "provider$1'$2'");
}

export async function parseBicep(source: string): Promise<Node> {
  const tree = (await bicepParser()).parse(withExtensionsAsProviders(source));
  if (tree === null) throw new Error("the Bicep parser returned no tree");
  return tree.rootNode;
}

function bicepPaths(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((entry) => {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) return bicepPaths(path);
      return path.endsWith(".bicep") ? [path] : [];
    });
}

const files = new Map<string, Promise<BicepFile>>();

export function loadBicep(absolutePath: string): Promise<BicepFile> {
  const key = resolve(absolutePath);
  let file = files.get(key);
  if (file === undefined) {
    file = (async () => {
      const source = readFileSync(key, "utf8");
      return {
        path: relative(repoRoot, key).split("\\").join("/"),
        absolutePath: key,
        source,
        root: await parseBicep(source),
      };
    })();
    files.set(key, file);
  }
  return file;
}

/** Every .bicep file under infra/, keyed by its repository-relative path. */
export async function loadInfra(): Promise<Map<string, BicepFile>> {
  const loaded = await Promise.all(bicepPaths(infraDir).map(loadBicep));
  return new Map(loaded.map((file) => [file.path, file]));
}

export async function infraFile(path: string): Promise<BicepFile> {
  return loadBicep(join(repoRoot, path));
}

/** Named children without comments, which tree-sitter treats as named "extras". */
export function kids(node: Node): Node[] {
  return node.namedChildren.filter(
    (child): child is Node => child !== null && child.type !== "comment" && child.type !== "diagnostic_comment",
  );
}

function kid(node: Node, index: number): Node {
  const child = kids(node)[index];
  if (child === undefined) throw new Error(`${node.type} at ${where(node)} has no child ${index}`);
  return child;
}

function field(node: Node, name: string): Node {
  const child = node.childForFieldName(name);
  if (child === null) throw new Error(`${node.type} at ${where(node)} has no ${name}`);
  return child;
}

export function where(node: Node): string {
  return `${node.startPosition.row + 1}:${node.startPosition.column + 1}`;
}

export function descendants(node: Node, type: string): Node[] {
  return node.descendantsOfType(type).filter((found): found is Node => found !== null);
}

/** ERROR and MISSING nodes, described with their position. */
export function syntaxProblems(root: Node): string[] {
  const problems: string[] = [];
  const visit = (node: Node): void => {
    if (node.isError || node.type === "ERROR") problems.push(`unexpected ${JSON.stringify(node.text.slice(0, 40))} at ${where(node)}`);
    else if (node.isMissing) problems.push(`missing ${node.type} at ${where(node)}`);
    for (const child of node.children) if (child !== null) visit(child);
  };
  visit(root);
  if (problems.length === 0 && root.hasError) problems.push("the tree reports an error");
  return problems;
}

// ---------------------------------------------------------------------------------------
// Declarations

export type DeclarationKind = "param" | "var" | "resource" | "module" | "output" | "type";

const declarationTypes: Record<string, DeclarationKind> = {
  type_declaration: "type",
  parameter_declaration: "param",
  variable_declaration: "var",
  resource_declaration: "resource",
  module_declaration: "module",
  output_declaration: "output",
};

export interface Body {
  /** The object literal that describes the resource or module. */
  readonly object: Node;
  /** The condition of `= if (...) {...}`, when there is one. */
  readonly condition: Node | undefined;
  /** The `for` of `= [for ...]`, when there is one. */
  readonly loop: Node | undefined;
}

export interface Declaration {
  readonly kind: DeclarationKind;
  readonly name: string;
  readonly node: Node;
  /** Decorator calls written above the declaration (`@description(...)`). */
  readonly decorators: readonly Node[];
  /** param: default value; var/output: value. */
  readonly value: Node | undefined;
  /** param/output: the written type. */
  readonly type: string | undefined;
  /** resource: `Microsoft.X/y@version`; module: the module path. */
  readonly target: string | undefined;
  readonly existing: boolean;
  readonly body: Body | undefined;
}

function unwrapBody(node: Node): Body {
  if (node.type === "object") return { object: node, condition: undefined, loop: undefined };
  if (node.type === "if_statement") {
    const inner = unwrapBody(kid(node, 1));
    return { object: inner.object, condition: kid(node, 0), loop: inner.loop };
  }
  if (node.type === "for_statement") {
    const inner = unwrapBody(field(node, "body"));
    return { object: inner.object, condition: inner.condition, loop: node };
  }
  throw new Error(`unexpected body ${node.type} at ${where(node)}`);
}

export function declarations(file: BicepFile): Declaration[] {
  const found: Declaration[] = [];
  let decorators: Node[] = [];
  for (const node of kids(file.root)) {
    if (node.type === "decorators") {
      decorators = kids(node).map((decorator) => kid(decorator, 0));
      continue;
    }
    const kind = declarationTypes[node.type];
    if (kind === undefined) {
      decorators = [];
      continue;
    }
    const children = kids(node);
    const name = kid(node, 0).text;
    let value: Node | undefined;
    let type: string | undefined;
    let target: string | undefined;
    let body: Body | undefined;
    switch (kind) {
      case "param":
      case "output":
        type = children[1]?.text;
        value = children[2];
        break;
      case "var":
        value = children[1];
        break;
      case "resource":
      case "module": {
        target = literal(kid(node, 1));
        const last = children[children.length - 1];
        if (last !== undefined) body = unwrapBody(last);
        break;
      }
    }
    found.push({
      kind,
      name,
      node,
      decorators,
      value,
      type,
      target,
      existing: node.children.some((child) => child?.type === "existing"),
      body,
    });
    decorators = [];
  }
  return found;
}

export function declarationsOf(file: BicepFile, kind: DeclarationKind): Map<string, Declaration> {
  return new Map(declarations(file).filter((d) => d.kind === kind).map((d) => [d.name, d]));
}

export function declared(file: BicepFile, kind: DeclarationKind, name: string): Declaration {
  const declaration = declarationsOf(file, kind).get(name);
  if (declaration === undefined) throw new Error(`${file.path} declares no ${kind} ${name}`);
  return declaration;
}

/** Resources of one type (`Microsoft.Web/sites`), whatever their API version. */
export function resourcesOfType(file: BicepFile, type: string): Declaration[] {
  return declarations(file).filter(
    (d) => d.kind === "resource" && d.target !== undefined && d.target.split("@")[0]?.toLowerCase() === type.toLowerCase(),
  );
}

export function decorator(declaration: Declaration, name: string): Node | undefined {
  return declaration.decorators.find((call) => call.childForFieldName("function")?.text === name);
}

export function callArguments(call: Node): Node[] {
  return kids(field(call, "arguments"));
}

export function callName(node: Node): string | undefined {
  return node.type === "call_expression" ? node.childForFieldName("function")?.text : undefined;
}

// ---------------------------------------------------------------------------------------
// Objects and strings

export function propertyKey(objectProperty: Node): string {
  const key = kid(objectProperty, 0);
  if (key.type === "identifier") return key.text;
  const text = literal(key);
  if (text === undefined) throw new Error(`computed key at ${where(key)}`);
  return text;
}

/** Properties of an object literal by key (keys with interpolation are left out). */
export function propertiesOf(object: Node): Map<string, Node> {
  const found = new Map<string, Node>();
  for (const entry of kids(object)) {
    if (entry.type !== "object_property") continue;
    const key = kid(entry, 0);
    if (key.type === "string" && literal(key) === undefined) continue;
    found.set(propertyKey(entry), kid(entry, 1));
  }
  return found;
}

/** The value at a path of keys inside nested object literals. */
export function property(object: Node | undefined, ...path: string[]): Node | undefined {
  let current = object;
  for (const key of path) {
    if (current === undefined || current.type !== "object") return undefined;
    current = propertiesOf(current).get(key);
  }
  return current;
}

export type StringPart = { readonly text: string } | { readonly expression: Node };

const escapes: Record<string, string> = { "\\\\": "\\", "\\'": "'", "\\n": "\n", "\\r": "\r", "\\t": "\t", "\\$": "$" };

function unescape(sequence: string): string {
  const simple = escapes[sequence];
  if (simple !== undefined) return simple;
  const unicode = /^\\u\{([0-9a-fA-F]+)\}$/.exec(sequence);
  if (unicode?.[1] !== undefined) return String.fromCodePoint(parseInt(unicode[1], 16));
  throw new Error(`unknown escape ${sequence}`);
}

/** The literal text and the interpolated expressions of a string, in order. */
export function stringParts(node: Node): StringPart[] {
  if (node.type !== "string") throw new Error(`${node.type} at ${where(node)} is not a string`);
  if (node.text.startsWith("'''")) return [{ text: node.text.slice(3, -3).replace(/^\r?\n/, "") }];
  return kids(node).map((part): StringPart => {
    switch (part.type) {
      case "string_content":
        return { text: part.text };
      case "escape_sequence":
        return { text: unescape(part.text) };
      case "interpolation":
        return { expression: kid(part, 0) };
      default:
        throw new Error(`unexpected ${part.type} in a string at ${where(part)}`);
    }
  });
}

/** A string without interpolation, or undefined for anything else. */
export function literal(node: Node | undefined): string | undefined {
  if (node === undefined || node.type !== "string") return undefined;
  const parts = stringParts(node);
  if (parts.some((part) => "expression" in part)) return undefined;
  return parts.map((part) => ("text" in part ? part.text : "")).join("");
}

/** `a.b.c` as ["a", "b", "c"]; undefined when the chain has calls or indexing. */
export function memberPath(node: Node): string[] | undefined {
  if (node.type === "identifier") return [node.text];
  if (node.type !== "member_expression") return undefined;
  const head = memberPath(field(node, "object"));
  return head === undefined ? undefined : [...head, field(node, "property").text];
}

// ---------------------------------------------------------------------------------------
// Symbols

export interface SymbolUse {
  readonly name: string;
  readonly node: Node;
}

/** Identifiers that name a declared symbol, a loop variable or a parameter in an expression. */
export function symbolUses(file: BicepFile): SymbolUse[] {
  return descendants(file.root, "identifier")
    .filter((identifier) => {
      const parent = identifier.parent;
      if (parent === null) return false;
      if (declarationTypes[parent.type] !== undefined && kids(parent)[0]?.id === identifier.id) return false;
      if (parent.type === "object_property" && kids(parent)[0]?.id === identifier.id) return false;
      if (parent.type === "call_expression" && parent.childForFieldName("function")?.id === identifier.id) return false;
      if (parent.type === "for_statement" && parent.childForFieldName("initializer")?.id === identifier.id) return false;
      return true;
    })
    .map((identifier) => ({ name: identifier.text, node: identifier }));
}

/** Names a file may refer to: its declarations and its loop variables. */
export function declaredSymbols(file: BicepFile): Set<string> {
  const names = new Set(declarations(file).filter((d) => d.kind !== "output").map((d) => d.name));
  for (const loop of descendants(file.root, "for_statement")) {
    const initializer = loop.childForFieldName("initializer");
    if (initializer !== null) names.add(initializer.text);
  }
  for (const type of ["loop_variable", "loop_enumerator"]) {
    for (const node of descendants(file.root, type)) names.add(node.text);
  }
  for (const lambda of descendants(file.root, "lambda_expression")) for (const name of lambdaParameters(lambda)) names.add(name);
  return names;
}

/** `x => ...` and `(x, y) => ...`: the names a lambda binds. */
function lambdaParameters(lambda: Node): string[] {
  const head = kids(lambda)[0];
  if (head === undefined) return [];
  if (head.type === "identifier") return [head.text];
  return kids(head).filter((node) => node.type === "identifier").map((node) => node.text);
}

// ---------------------------------------------------------------------------------------
// Evaluation of compile-time values

export type Value = string | number | boolean | null | readonly Value[] | { readonly [key: string]: Value };

export class NotStatic extends Error {}

export interface Evaluation {
  /** Values for parameters and other names (wins over declarations). */
  readonly bindings?: Readonly<Record<string, Value>>;
  /** Replaces the file read by loadJsonContent (path as written, resolved from the file). */
  readonly loadJson?: (absolutePath: string) => Value;
}

function isRecord(value: Value | undefined): value is { readonly [key: string]: Value } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fakeHash(values: readonly Value[]): string {
  return createHash("sha256").update(JSON.stringify(values)).digest("hex");
}

function asString(value: Value): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

/**
 * Evaluates what Bicep knows at compile time: literals, parameters (from bindings or their
 * defaults), variables, loadJsonContent, and the functions the infra uses on such values.
 * Anything that needs Azure (resource properties, resourceGroup()) throws NotStatic.
 */
export function evaluate(file: BicepFile, node: Node, options: Evaluation = {}): Value {
  const declared = new Map(declarations(file).filter((d) => d.kind !== "output").map((d) => [d.name, d]));
  const bindings = options.bindings ?? {};
  const visiting = new Set<string>();

  const resolveName = (name: string, at: Node): Value => {
    const bound = bindings[name];
    if (bound !== undefined) return bound;
    const declaration = declared.get(name);
    if (declaration === undefined || (declaration.kind !== "var" && declaration.kind !== "param")) {
      throw new NotStatic(`${name} at ${where(at)} is not known at compile time`);
    }
    if (declaration.value === undefined) throw new NotStatic(`param ${name} has no default and no binding`);
    if (visiting.has(name)) throw new Error(`${name} refers to itself`);
    visiting.add(name);
    try {
      return run(declaration.value);
    } finally {
      visiting.delete(name);
    }
  };

  /** Calls the lambda written at `node` with these arguments, in the bindings of the call. */
  const apply = (node: Node | undefined, ...argumentValues: Value[]): Value => {
    if (node?.type !== "lambda_expression") throw new Error(`a lambda is expected at ${node ? where(node) : "the call"}`);
    const names = lambdaParameters(node);
    const body = kids(node)[kids(node).length - 1]!;
    const scope = { ...bindings, ...Object.fromEntries(names.map((name, index) => [name, argumentValues[index] ?? null])) };
    return evaluate(file, body, { ...options, bindings: scope });
  };
  const itemsOf = (node: Node | undefined, at: Node): readonly Value[] => {
    const items = node === undefined ? undefined : run(node);
    if (!Array.isArray(items)) throw new Error(`an array is expected at ${where(at)}`);
    return items;
  };

  const call = (name: string, args: Node[], at: Node): Value => {
    const values = (): Value[] => args.map(run);
    switch (name) {
      case "toObject": {
        const result: Record<string, Value> = {};
        for (const item of itemsOf(args[0], at)) result[asString(apply(args[1], item))] = args[2] === undefined ? item : apply(args[2], item);
        return result;
      }
      case "map":
        return itemsOf(args[0], at).map((item, index) => apply(args[1], item, index));
      case "filter":
        return itemsOf(args[0], at).filter((item, index) => apply(args[1], item, index) === true);
      case "range": {
        const [start, count] = values();
        if (typeof start !== "number" || typeof count !== "number") throw new Error(`range() arguments at ${where(at)}`);
        return Array.from({ length: count }, (_, index) => start + index);
      }
      case "length": {
        const [value] = values();
        if (typeof value === "string" || Array.isArray(value)) return value.length;
        if (isRecord(value)) return Object.keys(value).length;
        throw new Error(`length() argument at ${where(at)}`);
      }
      case "toUpper": {
        const [text] = values();
        return asString(text ?? "").toUpperCase();
      }
      case "loadJsonContent": {
        const path = literal(args[0]);
        if (path === undefined) throw new Error(`loadJsonContent needs a literal path at ${where(at)}`);
        const absolute = resolve(dirname(file.absolutePath), path);
        const loaded: Value = options.loadJson ? options.loadJson(absolute) : JSON.parse(readFileSync(absolute, "utf8"));
        return loaded;
      }
      case "concat": {
        const all = values();
        if (all.every(Array.isArray)) return all.flatMap((value) => value as readonly Value[]);
        return all.map(asString).join("");
      }
      case "union": {
        const all = values();
        if (!all.every(isRecord)) throw new NotStatic(`union of non-objects at ${where(at)}`);
        return Object.assign({}, ...all);
      }
      case "join": {
        const [items, separator] = values();
        if (!Array.isArray(items) || typeof separator !== "string") throw new Error(`join arguments at ${where(at)}`);
        return items.map(asString).join(separator);
      }
      case "string": {
        const [value] = values();
        if (value === undefined) throw new Error(`string() needs an argument at ${where(at)}`);
        return typeof value === "string" ? value : JSON.stringify(value);
      }
      case "empty": {
        const [value] = values();
        if (value === null || value === undefined) return true;
        if (typeof value === "string" || Array.isArray(value)) return value.length === 0;
        if (isRecord(value)) return Object.keys(value).length === 0;
        throw new Error(`empty() of ${typeof value} at ${where(at)}`);
      }
      case "contains": {
        const [container, item] = values();
        if (typeof container === "string" && typeof item === "string") return container.includes(item);
        if (Array.isArray(container)) return container.some((entry) => JSON.stringify(entry) === JSON.stringify(item));
        if (isRecord(container) && typeof item === "string") return item in container;
        throw new Error(`contains() arguments at ${where(at)}`);
      }
      case "split": {
        const [text, separator] = values();
        if (typeof text !== "string" || typeof separator !== "string") throw new Error(`split() arguments at ${where(at)}`);
        return text.split(separator);
      }
      case "take": {
        const [items, count] = values();
        if ((typeof items !== "string" && !Array.isArray(items)) || typeof count !== "number") throw new Error(`take() arguments at ${where(at)}`);
        return items.slice(0, Math.max(count, 0));
      }
      case "json": {
        const [text] = values();
        if (typeof text !== "string") throw new Error(`json() argument at ${where(at)}`);
        return JSON.parse(text);
      }
      case "base64ToString": {
        const [text] = values();
        if (typeof text !== "string") throw new Error(`base64ToString() argument at ${where(at)}`);
        return Buffer.from(text, "base64").toString("utf8");
      }
      case "first": {
        const [items] = values();
        if (typeof items === "string" || Array.isArray(items)) return items[0] ?? "";
        throw new Error(`first() argument at ${where(at)}`);
      }
      case "last": {
        const [items] = values();
        if (typeof items === "string" || Array.isArray(items)) return items[items.length - 1] ?? "";
        throw new Error(`last() argument at ${where(at)}`);
      }
      case "replace": {
        const [text, oldText, newText] = values();
        if (typeof text !== "string" || typeof oldText !== "string" || typeof newText !== "string") throw new Error(`replace() arguments at ${where(at)}`);
        return text.split(oldText).join(newText);
      }
      case "base64": {
        const [text] = values();
        if (typeof text !== "string") throw new Error(`base64() argument at ${where(at)}`);
        return Buffer.from(text, "utf8").toString("base64");
      }
      case "toLower": {
        const [text] = values();
        return asString(text ?? "").toLowerCase();
      }
      case "guid":
      case "uniqueString": {
        const hash = fakeHash([name, ...values()]);
        return name === "uniqueString"
          ? hash.slice(0, 13)
          : `${hash.slice(0, 8)}-${hash.slice(8, 12)}-${hash.slice(12, 16)}-${hash.slice(16, 20)}-${hash.slice(20, 32)}`;
      }
      default:
        throw new NotStatic(`${name}() at ${where(at)} is not evaluated here`);
    }
  };

  const binary = (operator: string, left: Value, right: Value, at: Node): Value => {
    switch (operator) {
      case "==":
        return JSON.stringify(left) === JSON.stringify(right);
      case "!=":
        return JSON.stringify(left) !== JSON.stringify(right);
      case "&&":
        return left === true && right === true;
      case "||":
        return left === true || right === true;
      case "??":
        return left ?? right;
    }
    if (typeof left !== "number" || typeof right !== "number") throw new Error(`${operator} needs numbers at ${where(at)}`);
    switch (operator) {
      case "+":
        return left + right;
      case "-":
        return left - right;
      case "*":
        return left * right;
      case "/":
        return Math.trunc(left / right);
      case "%":
        return left % right;
      case "<":
        return left < right;
      case "<=":
        return left <= right;
      case ">":
        return left > right;
      case ">=":
        return left >= right;
    }
    throw new Error(`operator ${operator} at ${where(at)}`);
  };

  // `[for item in items: body]` and `[for (item, index) in items: body]`, with an optional
  // `if (...)` filter in front of the body.
  const loop = (statement: Node): Value[] => {
    const initializer = statement.childForFieldName("initializer");
    const body = field(statement, "body");
    const parameters = kids(statement).find((child) => child.type === "for_loop_parameters");
    const iterable = kids(statement).find(
      (child) => child.id !== initializer?.id && child.id !== body.id && child.id !== parameters?.id,
    );
    if (iterable === undefined) throw new Error(`loop without items at ${where(statement)}`);
    const itemName = initializer?.text ?? (parameters ? descendants(parameters, "loop_variable")[0]?.text : undefined);
    const indexName = parameters ? descendants(parameters, "loop_enumerator")[0]?.text : undefined;
    if (itemName === undefined) throw new Error(`loop without a variable at ${where(statement)}`);
    const items = run(iterable);
    if (!Array.isArray(items)) throw new Error(`loop over a non-array at ${where(statement)}`);
    return items.flatMap((item: Value, index: number) => {
      const scope: Evaluation = {
        ...options,
        bindings: { ...bindings, [itemName]: item, ...(indexName === undefined ? {} : { [indexName]: index }) },
      };
      if (body.type !== "if_statement") return [evaluate(file, body, scope)];
      return evaluate(file, kid(body, 0), scope) === true ? [evaluate(file, kid(body, 1), scope)] : [];
    });
  };

  const run = (expression: Node): Value => {
    switch (expression.type) {
      case "string":
        return stringParts(expression)
          .map((part) => ("text" in part ? part.text : asString(run(part.expression))))
          .join("");
      case "number":
        return Number(expression.text);
      case "boolean":
        return expression.text === "true";
      case "null":
        return null;
      case "array":
        return kids(expression).map(run);
      case "object": {
        const result: Record<string, Value> = {};
        for (const entry of kids(expression)) {
          if (entry.type !== "object_property") continue;
          const key = kid(entry, 0);
          const name = key.type === "identifier" ? key.text : asString(run(key));
          result[name] = run(kid(entry, 1));
        }
        return result;
      }
      case "identifier":
        return resolveName(expression.text, expression);
      case "parenthesized_expression":
        return run(kid(expression, 0));
      case "ternary_expression":
        return run(field(expression, "condition")) === true
          ? run(field(expression, "consequence"))
          : run(field(expression, "alternative"));
      case "unary_expression": {
        const operator = expression.child(0)?.type;
        const argument = run(field(expression, "argument"));
        if (operator === "!") return argument !== true;
        if (operator === "-" && typeof argument === "number") return -argument;
        throw new Error(`unary ${operator} at ${where(expression)}`);
      }
      case "binary_expression": {
        const operator = field(expression, "operator").type;
        return binary(operator, run(field(expression, "left")), run(field(expression, "right")), expression);
      }
      case "member_expression": {
        const object = run(field(expression, "object"));
        const name = field(expression, "property").text;
        // `a.?b`: null when a is null or has no b.
        if (expression.text.slice(field(expression, "object").text.length).startsWith(".?") && (object === null || (isRecord(object) && !(name in object)))) return null;
        if (!isRecord(object) || !(name in object)) {
          throw new Error(`${expression.text} at ${where(expression)}: no property ${name}`);
        }
        const value = object[name];
        if (value === undefined) throw new Error(`${expression.text} is undefined`);
        return value;
      }
      case "subscript_expression": {
        const object = run(field(expression, "object"));
        const index = run(field(expression, "index"));
        if (Array.isArray(object) && typeof index === "number") {
          const value = object[index];
          if (value === undefined) throw new Error(`${expression.text} at ${where(expression)} is out of range`);
          return value;
        }
        if (isRecord(object) && typeof index === "string" && index in object) return object[index] ?? null;
        throw new Error(`${expression.text} at ${where(expression)} cannot be indexed`);
      }
      case "call_expression": {
        const name = callName(expression);
        if (name === undefined) throw new Error(`call at ${where(expression)}`);
        return call(name, callArguments(expression), expression);
      }
      case "for_statement":
        return loop(expression);
      default:
        throw new NotStatic(`${expression.type} at ${where(expression)} is not evaluated here`);
    }
  };

  return run(node);
}

/** The value of a variable (or parameter default) of a file. */
export function valueOf(file: BicepFile, name: string, options: Evaluation = {}): Value {
  const declaration = declarations(file).find((d) => d.name === name && (d.kind === "var" || d.kind === "param"));
  if (declaration?.value === undefined) throw new Error(`${file.path} has no value for ${name}`);
  return evaluate(file, declaration.value, options);
}
