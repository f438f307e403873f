/// <reference types="@kusto/language-service-next" />
import type { KustoTable } from "./applicationInsightsTables.js";

/**
 * Microsoft's Kusto language service (Kusto.Language, compiled to JavaScript with Bridge.NET)
 * checks the portal's queries the way Log Analytics does: syntax, table and column names,
 * function signatures and types. The package is two scripts meant for a page's global scope:
 * the Bridge runtime, then the language service; both attach themselves to `globalThis`.
 */
type Language = typeof Kusto.Language;

let loaded: Language | undefined;

/** Loads the scripts once per process (about a quarter of a second). */
export function kustoLanguage(): Language {
  if (loaded === undefined) {
    require("@kusto/language-service-next/bridge.js");
    require("@kusto/language-service-next/Kusto.Language.Bridge.js");
    loaded = Kusto.Language;
  }
  return loaded;
}

function items<T>(list: System.Collections.Generic.IReadOnlyList$1<T> | null): T[] {
  const result: T[] = [];
  if (list === null) return result;
  for (let index = 0; index < list.Count; index += 1) result.push(list.getItem(index));
  return result;
}

/** A database holding the given tables, as the query's scope (an Application Insights resource) sees them. */
export function globalsWith(tables: readonly KustoTable[]): Kusto.Language.GlobalState {
  const language = kustoLanguage();
  const symbols = tables.map(
    (table) =>
      new language.Symbols.TableSymbol.$ctor7(table.name, `(${table.columns.map((column) => `['${column.name}']:${column.type}`).join(", ")})`, table.description),
  );
  const globals = language.GlobalState.Default?.WithDatabase(new language.Symbols.DatabaseSymbol.ctor("monitoring", symbols));
  if (!globals) throw new Error("the Kusto language service gave no global state");
  return globals;
}

export interface Diagnostic {
  readonly severity: string;
  readonly code: string;
  readonly message: string;
  /** 1-based line and column of the start, in the query text. */
  readonly line: number;
  readonly column: number;
  readonly excerpt: string;
}

export interface CompiledQuery {
  readonly code: Kusto.Language.KustoCode;
  readonly diagnostics: readonly Diagnostic[];
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split("\n");
  return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1 };
}

/** Parses and binds a query against the tables, and returns every diagnostic, errors and warnings. */
export function compileQuery(text: string, globals: Kusto.Language.GlobalState): CompiledQuery {
  const code = kustoLanguage().KustoCode.ParseAndAnalyze(text, globals);
  if (!code) throw new Error("the Kusto language service returned no code");
  const diagnostics = items(code.GetDiagnostics()).map((diagnostic) => {
    const start = diagnostic.Start;
    const lineText = text.slice(text.lastIndexOf("\n", start - 1) + 1).split("\n")[0] ?? "";
    return {
      severity: String(diagnostic.Severity),
      code: diagnostic.Code ?? "",
      message: diagnostic.Message ?? "",
      ...position(text, start),
      excerpt: lineText.trim(),
    };
  });
  return { code, diagnostics };
}

/** Where a query takes a field from: the JSON object in the message, or the host's custom dimensions. */
export type FieldSource = "message" | "customDimensions";

/** The JSON type a query takes a field to have, from the conversion it applies. */
export type AssumedType = "string" | "integer" | "number" | "boolean";

export interface FieldRead {
  readonly source: FieldSource;
  readonly name: string;
  /** Undefined when the query uses the dynamic value without converting it. */
  readonly assumed: AssumedType | undefined;
  readonly text: string;
}

const conversions: Readonly<Record<string, AssumedType>> = {
  tostring: "string",
  toint: "integer",
  tolong: "integer",
  todouble: "number",
  toreal: "number",
  todecimal: "number",
  tobool: "boolean",
  toboolean: "boolean",
};

const parsers = new Set(["parse_json", "todynamic"]);

function calledName(node: Kusto.Language.Syntax.SyntaxNode | null): string | undefined {
  const language = kustoLanguage();
  if (!(node instanceof language.Syntax.FunctionCallExpression)) return undefined;
  return node.Name?.SimpleName ?? undefined;
}

function callArgument(node: Kusto.Language.Syntax.SyntaxNode): Kusto.Language.Syntax.Expression | undefined {
  const language = kustoLanguage();
  if (!(node instanceof language.Syntax.FunctionCallExpression)) return undefined;
  const expressions = node.ArgumentList?.Expressions;
  if (!expressions || expressions.ChildCount !== 1) return undefined;
  const argument = expressions.GetChild(0)?.GetChild(0);
  return argument instanceof language.Syntax.Expression ? argument : undefined;
}

/** `parse_json(message)` (or todynamic), the one way a query reads the webhook's line. */
function parsesMessage(node: Kusto.Language.Syntax.SyntaxNode | null): boolean {
  const language = kustoLanguage();
  if (node === null || !parsers.has(calledName(node) ?? "")) return false;
  const argument = callArgument(node);
  return argument instanceof language.Syntax.NameReference && argument.SimpleName === "message";
}

/** The conversion wrapped directly around an expression, looking through parentheses. */
function conversionAround(node: Kusto.Language.Syntax.SyntaxNode): string | undefined {
  const kinds = kustoLanguage().Syntax.SyntaxKind;
  // Generic syntax classes (lists, separated elements) are told apart by kind, not by class.
  const between = new Set([kinds.ParenthesizedExpression, kinds.SeparatedElement, kinds.List, kinds.ExpressionList]);
  let parent = node.Parent;
  while (parent !== null && between.has(parent.Kind)) parent = parent.Parent;
  return calledName(parent);
}

/**
 * Every field a query takes out of a trace: `x["name"]` or `x.name` where `x` is
 * `parse_json(message)` (directly or through a column the query made from it) or the
 * `customDimensions` column. Found in the bound syntax tree: a column counts as the parsed
 * message when the symbol its name refers to was declared as `= parse_json(message)`.
 */
export function fieldReads(compiled: CompiledQuery): FieldRead[] {
  const language = kustoLanguage();
  const root = compiled.code.Syntax;
  if (!root) return [];
  const parsedColumns = new Set<Kusto.Language.Symbols.Symbol>();
  root.WalkNodes((node) => {
    if (node instanceof language.Syntax.SimpleNamedExpression && parsesMessage(node.Expression)) {
      const symbol = node.Name?.ReferencedSymbol;
      if (symbol) parsedColumns.add(symbol);
    }
  });
  const sourceOf = (base: Kusto.Language.Syntax.Expression | null): FieldSource | undefined => {
    if (base === null) return undefined;
    if (parsesMessage(base)) return "message";
    if (!(base instanceof language.Syntax.NameReference)) return undefined;
    if (base.ReferencedSymbol !== null && parsedColumns.has(base.ReferencedSymbol)) return "message";
    return base.SimpleName === "customDimensions" ? "customDimensions" : undefined;
  };
  const reads: FieldRead[] = [];
  root.WalkNodes((node) => {
    let base: Kusto.Language.Syntax.Expression | null = null;
    let name: unknown;
    if (node instanceof language.Syntax.ElementExpression) {
      base = node.Expression;
      const selector = node.Selector;
      name = selector instanceof language.Syntax.BracketedExpression ? selector.Expression?.LiteralValue : undefined;
    } else if (node instanceof language.Syntax.PathExpression) {
      base = node.Expression;
      name = node.Selector instanceof language.Syntax.NameReference ? node.Selector.SimpleName : undefined;
    } else {
      return;
    }
    const source = sourceOf(base);
    if (source === undefined) return;
    if (typeof name !== "string") throw new Error(`a field of ${source} is read with a name that is not a literal: ${node.toString()}`);
    reads.push({ source, name, assumed: conversions[conversionAround(node) ?? ""], text: node.toString() ?? "" });
  });
  return reads;
}
