import * as t from "io-ts";

/** One thing wrong with (or suspicious about) a credential spec: where, and what, never the value. */
export interface Finding {
  readonly path: string;
  readonly problem: string;
}

export function describeFinding(finding: Finding): string {
  return `${finding.path}: ${finding.problem}`;
}

/**
 * io-ts errors as findings: the path is built from the keys the decoder walked (array items as
 * [i], intersection members skipped) and the problem from the codec's name. The offending
 * value is never looked at beyond whether it was there: a credential spec's values are for
 * those who may read it, not for whoever reads a log or an admission message.
 */
export function findingsOf(errors: t.Errors, root: string): Finding[] {
  const seen = new Map<string, Finding>();
  for (const error of errors) {
    const finding = findingOf(error, root);
    if (!seen.has(finding.path)) seen.set(finding.path, finding);
  }
  return [...seen.values()];
}

function findingOf(error: t.ValidationError, root: string): Finding {
  let path = root;
  error.context.forEach((entry, index) => {
    if (index === 0) return;
    const parent = error.context[index - 1]!.type;
    if (parent instanceof t.IntersectionType) return;
    if (parent instanceof t.ArrayType || (parent instanceof t.RefinementType && parent.type instanceof t.ArrayType)) path += `[${entry.key}]`;
    else path = path === "" ? entry.key : `${path}.${entry.key}`;
  });
  const last = error.context[error.context.length - 1];
  if (!last || last.actual === undefined) return { path, problem: "is required" };
  return { path, problem: `must be ${expected(last.type)}` };
}

function expected(type: t.Decoder<unknown, unknown>): string {
  if (type instanceof t.InterfaceType || type instanceof t.IntersectionType || type instanceof t.PartialType) return "an object";
  if (type instanceof t.ArrayType) return "a list";
  if (type instanceof t.StringType) return "a string";
  if (type instanceof t.LiteralType) return JSON.stringify(type.value);
  return type.name;
}
