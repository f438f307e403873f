import { knownKeys } from "./credSpecCodec.js";
import type { Finding } from "./credSpecFindings.js";

/**
 * Keys spelled in the wrong case (`domainJoinConfig`, `SID`): some readers of a credential spec
 * match keys exactly and others do not, so such a spec works on one host and fails on another.
 * The copy returned has the documented spellings, so that the rest of the checks judge what was
 * meant; each respelled key is a warning. A key present in both spellings keeps the exact one.
 */
export function withDocumentedKeyCase(value: unknown, root: string): { readonly value: unknown; readonly warnings: readonly Finding[] } {
  const warnings: Finding[] = [];
  return { value: respell(value, "", root, warnings), warnings };
}

function respell(value: unknown, level: string, path: string, warnings: Finding[]): unknown {
  const keys = knownKeys[level];
  if (!keys || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return level === "GroupManagedServiceAccounts" ? value.map((item, i) => respellObject(item, level, `${path}[${i}]`, warnings)) : value;
  return respellObject(value, level, path, warnings);
}

function respellObject(value: unknown, level: string, path: string, warnings: Finding[]): unknown {
  const keys = knownKeys[level] ?? [];
  if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
  const result: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const documented = keys.find((k) => k.toLowerCase() === key.toLowerCase());
    const childPath = path === "" ? key : `${path}.${key}`;
    if (documented === undefined) {
      result[key] = child;
      continue;
    }
    if (documented !== key) {
      warnings.push({ path: childPath, problem: `key in the wrong case: the documented spelling is ${documented}` });
      if (Object.hasOwn(value, documented)) continue;
    }
    const nested = level === "GroupManagedServiceAccounts" ? "" : documented;
    result[documented] = nested === "" ? child : respell(child, documented, childPath, warnings);
  }
  return result;
}
