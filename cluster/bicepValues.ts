import { isJsonObject as isRecord } from "../lib/jsonObject.js";

export { isRecord };

/**
 * Kubernetes objects written as Bicep values: strings that carry placeholders become Bicep
 * expressions, multi-line text becomes a block, and a value that differs between the relay and url
 * renderings becomes a conditional. Used by the Bicep wiring module's renderer (bicepWiring.ts).
 */

export const placeholder = (name: string) => `{{${name}}}`;
export const placeholderPattern = /\{\{([A-Za-z][A-Za-z0-9]*)\}\}/g;

export function quote(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\$\{/g, "\\${").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t")}'`;
}

/** Text of several lines, written verbatim as a Bicep multi-line string. */
export function isBlock(text: string): boolean {
  return text.replace(/\n$/, "").includes("\n") && !text.includes("'''");
}

/** A string with placeholders: the parameter itself, or an interpolation of it. */
export function stringExpression(text: string): string {
  const whole = /^\{\{([A-Za-z][A-Za-z0-9]*)\}\}$/.exec(text);
  if (whole?.[1] !== undefined) return whole[1];
  const names = [...new Set([...text.matchAll(placeholderPattern)].map((m) => m[1] ?? ""))];
  if (isBlock(text)) {
    // Long text (nginx.conf) stays readable: a verbatim block with the parameters replaced in.
    return names.reduce((expression, name) => `replace(${expression}, '${placeholder(name)}', ${name})`, `'''\n${text}'''`);
  }
  const parts = text.split(placeholderPattern);
  return `'${parts.map((part, i) => (i % 2 === 1 ? `\${${part}}` : quote(part).slice(1, -1))).join("")}'`;
}

export function base64Of(text: string): string | undefined {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  const decoded = Buffer.from(text, "base64").toString("utf8");
  return Buffer.from(decoded).toString("base64") === text ? decoded : undefined;
}

export function bicepString(text: string): string {
  if (text.includes("{{")) return stringExpression(text);
  const decoded = base64Of(text);
  if (decoded?.includes("{{")) return `base64(${stringExpression(decoded)})`;
  if (isBlock(text)) return `'''\n${text}'''`;
  return quote(text);
}

export function bicepKey(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : quote(key);
}

// Kubernetes IntOrString fields: the extension's type data calls them strings, so an integer
// there draws BCP036 although the API server takes it. The warning is silenced where it is wrong.
const intOrStringFields = new Set(["maxSurge", "maxUnavailable", "minAvailable", "targetPort"]);

export function entry(indent: string, key: string, item: unknown, text: string): string {
  const suppression = intOrStringFields.has(key) && typeof item === "number" ? `#disable-next-line BCP036\n${indent}` : "";
  return `${indent}${suppression}${bicepKey(key)}: ${text}`;
}

export function bicepValue(value: unknown, indent: string): string {
  const inner = `${indent}  `;
  if (typeof value === "string") return bicepString(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    return `[\n${value.map((item) => `${inner}${bicepValue(item, inner)}`).join("\n")}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return "{}";
  return `{\n${entries.map(([key, item]) => entry(inner, key, item, bicepValue(item, inner))).join("\n")}\n${indent}}`;
}

/** One value for both modes, with `relay ? ... : ...` only where the two differ. */
export function mergedValue(relayValue: unknown, urlValue: unknown, indent: string): string {
  const inner = `${indent}  `;
  const relayText = bicepValue(relayValue, indent);
  const urlText = bicepValue(urlValue, indent);
  if (relayText === urlText) return relayText;
  if (Array.isArray(relayValue) && Array.isArray(urlValue) && relayValue.length === urlValue.length) {
    return `[\n${relayValue.map((item, i) => `${inner}${mergedValue(item, urlValue[i], inner)}`).join("\n")}\n${indent}]`;
  }
  if (isRecord(relayValue) && isRecord(urlValue) && JSON.stringify(Object.keys(relayValue)) === JSON.stringify(Object.keys(urlValue))) {
    return `{\n${Object.keys(relayValue)
      .map((key) => entry(inner, key, relayValue[key], mergedValue(relayValue[key], urlValue[key], inner)))
      .join("\n")}\n${indent}}`;
  }
  return `relay ? ${relayText} : ${urlText}`;
}

// ---------------------------------------------------------------------------------------
// Resources
