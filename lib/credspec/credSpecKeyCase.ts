import { knownKeys, maxAccounts, maxKeyLength, maxKeysPerObject } from "./credSpecCodec.js";
import type { Finding } from "./credSpecFindings.js";

/**
 * Keys spelled in the wrong case (`domainJoinConfig`, `SID`): some readers of a credential spec
 * match keys exactly and others do not, so such a spec works on one host and fails on another.
 * The copy returned has the documented spellings, so that the rest of the checks judge what was
 * meant; each respelled key is a warning. A key given twice in different spellings is an error:
 * a reader that ignores case takes one of the two copies, and which one is not ours to know, so
 * the copy the checks did not judge could be the one a Windows host uses. For the same reason a
 * key with a character outside ASCII is an error at these levels: no documented key has one, and
 * case folding beyond ASCII differs between readers (`ſid` is `SID` to some, the Kelvin sign `K`
 * is `k` to others). An object with more keys than any credential spec needs, or more accounts,
 * is an error too: the in-cluster policy checks the same shape within a fixed cost, and the two
 * must agree.
 */
export function withDocumentedKeyCase(value: unknown, root: string): { readonly value: unknown; readonly warnings: readonly Finding[]; readonly errors: readonly Finding[] } {
  const warnings: Finding[] = [];
  const errors: Finding[] = [];
  return { value: respell(value, "", root, { warnings, errors }), warnings, errors };
}

interface Findings {
  readonly warnings: Finding[];
  readonly errors: Finding[];
}

function respell(value: unknown, level: string, path: string, findings: Findings): unknown {
  const keys = knownKeys[level];
  if (!keys || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    if (level !== "GroupManagedServiceAccounts") return value;
    if (value.length > maxAccounts) {
      findings.errors.push({ path, problem: `has ${value.length} entries; a credential spec lists at most ${maxAccounts} accounts` });
      return value;
    }
    return value.map((item, i) => respellObject(item, level, `${path}[${i}]`, findings));
  }
  return respellObject(value, level, path, findings);
}

const nonAscii = /[^\x00-\x7f]/;
export const repeatedKeyProblem = "is given more than once in different cases; give each key once";
export const longKeyProblem = `is a key of more than ${maxKeyLength} characters: no credential spec key is that long; remove it`;
export const nonAsciiProblem = "is not an ASCII key: no credential spec key has another character, and readers fold case beyond ASCII differently; remove it";

/** Each level's documented keys by their lower-case spelling, made once: this runs on every credential spec admission. */
const documentedByLevel = new Map<string, ReadonlyMap<string, string>>(
  Object.entries(knownKeys).map(([level, keys]) => [level, new Map((keys ?? []).map((key) => [key.toLowerCase(), key]))]),
);
const noKeys: ReadonlyMap<string, string> = new Map();

function respellObject(value: unknown, level: string, path: string, findings: Findings): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  const documentedKeys = documentedByLevel.get(level) ?? noKeys;
  // No prototype: whatever a key is called, it stays a key and never reaches one.
  const result: Record<string, unknown> = Object.create(null);
  const entries = Object.entries(value);
  const pathOf = (key: string) => (path === "" ? key : `${path}.${key}`);
  if (entries.length > maxKeysPerObject) {
    findings.errors.push({ path, problem: `has ${entries.length} keys; an object of a credential spec has at most ${maxKeysPerObject}` });
    return value;
  }
  for (const [key] of entries) {
    // Named by its start: the key itself may be as long as the body allows.
    if (key.length > maxKeyLength) findings.errors.push({ path: pathOf(`${[...key].slice(0, maxKeyLength).join("")}…`), problem: longKeyProblem });
    else if (nonAscii.test(key)) findings.errors.push({ path: pathOf(key), problem: nonAsciiProblem });
  }
  const lowered = entries.map(([key]) => key.toLowerCase());
  let repeated: Set<string> | undefined;
  const seen = new Set<string>();
  for (const lower of lowered) {
    if (seen.has(lower)) (repeated ??= new Set()).add(lower);
    seen.add(lower);
  }
  for (let i = 0; i < entries.length; i++) {
    const [key, child] = entries[i]!;
    const lower = lowered[i]!;
    if (repeated?.has(lower)) {
      findings.errors.push({ path: pathOf(key), problem: repeatedKeyProblem });
      continue;
    }
    const documented = documentedKeys.get(lower);
    if (documented === undefined) {
      result[key] = child;
      continue;
    }
    if (documented !== key) findings.warnings.push({ path: pathOf(key), problem: `key in the wrong case: the documented spelling is ${documented}` });
    result[documented] = level === "GroupManagedServiceAccounts" ? child : respell(child, documented, pathOf(key), findings);
  }
  return result;
}
