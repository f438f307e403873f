import { knownKeys } from "./credSpecCodec.js";
import type { Finding } from "./credSpecFindings.js";

/**
 * Keys spelled in the wrong case (`domainJoinConfig`, `SID`): some readers of a credential spec
 * match keys exactly and others do not, so such a spec works on one host and fails on another.
 * The copy returned has the documented spellings, so that the rest of the checks judge what was
 * meant; each respelled key is a warning. A key given twice in different spellings is an error:
 * a reader that ignores case takes one of the two copies, and which one is not ours to know, so
 * the copy the checks did not judge could be the one a Windows host uses.
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
  if (Array.isArray(value)) return level === "GroupManagedServiceAccounts" ? value.map((item, i) => respellObject(item, level, `${path}[${i}]`, findings)) : value;
  return respellObject(value, level, path, findings);
}

function respellObject(value: unknown, level: string, path: string, findings: Findings): unknown {
  const keys = knownKeys[level] ?? [];
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  // No prototype: whatever a key is called, it stays a key and never reaches one.
  const result: Record<string, unknown> = Object.create(null);
  const spellings = new Map<string, number>();
  for (const key of Object.keys(value)) spellings.set(key.toLowerCase(), (spellings.get(key.toLowerCase()) ?? 0) + 1);
  for (const [key, child] of Object.entries(value)) {
    const documented = keys.find((k) => k.toLowerCase() === key.toLowerCase());
    const childPath = path === "" ? key : `${path}.${key}`;
    if ((spellings.get(key.toLowerCase()) ?? 0) > 1) {
      findings.errors.push({ path: childPath, problem: "is given more than once in different cases; give each key once" });
      continue;
    }
    if (documented === undefined) {
      result[key] = child;
      continue;
    }
    if (documented !== key) findings.warnings.push({ path: childPath, problem: `key in the wrong case: the documented spelling is ${documented}` });
    const nested = level === "GroupManagedServiceAccounts" ? "" : documented;
    result[documented] = nested === "" ? child : respell(child, documented, childPath, findings);
  }
  return result;
}
