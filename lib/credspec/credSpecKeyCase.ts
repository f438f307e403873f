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
    const items = value.map((item, i) => respellObject(item, level, `${path}[${i}]`, findings));
    return items.every((item, i) => item === value[i]) ? value : items;
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
/** Each level's documented keys as they are spelled. */
const spelledByLevel = new Map<string, ReadonlySet<string>>(Object.entries(knownKeys).map(([level, keys]) => [level, new Set(keys)]));
const noSpellings: ReadonlySet<string> = new Set();

function respellObject(value: unknown, level: string, path: string, findings: Findings): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  if (keys.length > maxKeysPerObject) {
    findings.errors.push({ path, problem: `has ${keys.length} keys; an object of a credential spec has at most ${maxKeysPerObject}` });
    return value;
  }
  const spelled = spelledByLevel.get(level) ?? noSpellings;
  // Kept as it is only when it is a plain object (as JSON and YAML readers make them): the codecs
  // then read nothing a prototype of its own could lend it.
  const prototype: unknown = Object.getPrototypeOf(value);
  if ((prototype === Object.prototype || prototype === null) && keys.every((key) => spelled.has(key))) {
    return withRespelledChildren(value as Record<string, unknown>, keys, level, path, findings);
  }
  const documentedKeys = documentedByLevel.get(level) ?? noKeys;
  // No prototype: whatever a key is called, it stays a key and never reaches one.
  const result: Record<string, unknown> = Object.create(null);
  const entries = Object.entries(value);
  const pathOf = (key: string) => (path === "" ? key : `${path}.${key}`);
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

/**
 * An object whose every key already has its documented spelling, the common case (every
 * credential spec admission runs this): nothing at its level to report (documented keys are
 * ASCII, short and distinct in any case), only what it holds to look at. The object itself is
 * kept when nothing it holds is respelled; only then is a copy made.
 */
function withRespelledChildren(value: Record<string, unknown>, keys: readonly string[], level: string, path: string, findings: Findings): unknown {
  if (level === "GroupManagedServiceAccounts") return value;
  let copy: Record<string, unknown> | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const child = value[key];
    const respelled = typeof child === "object" && child !== null && documentedByLevel.has(key) ? respell(child, key, path === "" ? key : `${path}.${key}`, findings) : child;
    if (respelled !== child && copy === undefined) {
      // No prototype, as for any respelled object.
      copy = Object.create(null) as Record<string, unknown>;
      for (let j = 0; j < i; j++) copy[keys[j]!] = value[keys[j]!];
    }
    if (copy !== undefined) copy[key] = respelled;
  }
  return copy ?? value;
}
