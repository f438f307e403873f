import {
  maxAccounts,
  maxCmsPlugins,
  maxDnsNameLength,
  maxKeyLength,
  maxKeysPerObject,
  maxTextLength,
  bracedGuidPattern,
  CmsPlugins,
  DnsName,
  DomainGuid,
  DomainSid,
  dnsNamePattern,
  domainSidPattern,
  GroupManagedServiceAccounts,
  guidPattern,
  NetBiosName,
  netBiosNamePattern,
  PluginGuid,
  NonEmpty,
} from "../credspec/credSpecCodec.js";
import { reservedCredSpecKeys, reservedKeyProblem } from "../credspec/checkCredSpec.js";
import { longKeyProblem, nonAsciiProblem, repeatedKeyProblem } from "../credspec/credSpecKeyCase.js";
import { maxListed } from "../credspec/validateCredSpecObject.js";
import { celString, denyingPolicy, safetyNetWho } from "./safetyNetParts.js";
import { safetyNetCredSpecPolicyName } from "./safetyNetNames.js";

/**
 * The safety net's policy for GMSACredentialSpec objects: the structural rules of the credential
 * spec webhook (lib/credspec/checkCredSpec.ts) that CEL can express, held by the API server itself
 * so that a malformed spec is refused even when the webhook does not run. Every pattern comes from
 * the codecs the webhook decodes with, and every problem is said in the webhook's words: one
 * refusal lists each field and what is wrong with it, `credspec.DomainJoinConfig.Sid: must be a
 * domain SID …`. Keys are matched in any case, as the webhook reads them (`SID` is `Sid`), and a
 * key given twice in different cases is refused.
 *
 * What the webhook checks and this policy does not: reserved keys below the levels the schema
 * names (CEL cannot walk an object of any depth), and the warnings (they refuse nothing). The
 * patterns are rendered for RE2 so that they match what JavaScript matches (re2 below), and both
 * refuse keys outside ASCII and objects larger than any spec needs, where the two would
 * otherwise fold case differently or the policy run out of its cost budget.
 */
export { safetyNetCredSpecPolicyName } from "./safetyNetNames.js";

const who = safetyNetWho;

const cel = celString;

/**
 * JavaScript's white space, which `\s` means there; RE2's `\s` is ASCII white space only (and
 * not even \v), so the policy spells the set out.
 */
const javaScriptSpace = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

/**
 * A codec's pattern as RE2 source that matches the same strings. RE2 counts code points, as
 * JavaScript does with `u` (the only pattern with a counted repetition of any character carries
 * it); `i` becomes explicit letter pairs, since RE2 folds ſ to s and the Kelvin sign to k where
 * JavaScript does not; `\s` and `\S` become JavaScript's set of white space.
 */
export function re2(pattern: RegExp): string {
  const flags = new Set(pattern.flags);
  for (const flag of flags) if (flag !== "i" && flag !== "u") throw new Error(`pattern ${pattern} has flag ${flag}, which the policy does not render`);
  let out = "";
  let inClass = false;
  const source = pattern.source;
  for (let i = 0; i < source.length; i++) {
    const char = source[i]!;
    if (char === "\\") {
      const next = source[++i];
      if (next === "s") out += inClass ? javaScriptSpace : `[${javaScriptSpace}]`;
      else if (next === "S" && !inClass) out += `[^${javaScriptSpace}]`;
      else if (next === "S") throw new Error(`pattern ${pattern}: \\S inside a class is not rendered`);
      else out += char + (next ?? "");
      continue;
    }
    if (char === "[" && !inClass) inClass = true;
    else if (char === "]" && inClass) inClass = false;
    if (flags.has("i") && /[A-Za-z]/.test(char)) {
      if (inClass) throw new Error(`pattern ${pattern}: a letter inside a class of a case-insensitive pattern is not rendered`);
      out += `[${char.toLowerCase()}${char.toUpperCase()}]`;
      continue;
    }
    out += char;
  }
  return out;
}

// The webhook's own keys and words (lib/credspec), so that both say the same.
const reservedKeys = [...reservedCredSpecKeys];
const reservedProblem = reservedKeyProblem;
const repeatedProblem = repeatedKeyProblem;
const nonEmpty = { pattern: /\S/, expected: NonEmpty.name, maxLength: maxTextLength };

interface StringField {
  readonly kind: "string";
  readonly key: string;
  readonly pattern?: RegExp;
  readonly expected: string;
  /**
   * Checked with size() before the pattern, which the API server charges by the string's length:
   * at least the longest string the pattern matches, so the verdict is the pattern's.
   */
  readonly maxLength?: number;
}
interface ObjectField {
  readonly kind: "object";
  readonly key: string;
  readonly optional?: boolean;
  readonly fields: readonly Field[];
}
interface OtherField {
  readonly kind: "plugins" | "accounts";
  readonly key: string;
}
type Field = StringField | ObjectField | OtherField;

const string = (key: string, shape: { pattern?: RegExp; expected: string; maxLength?: number }): StringField => ({ kind: "string", key, ...shape });

/** The credential spec as the codecs decode it (lib/credspec/credSpecCodec.ts). */
const credspec: ObjectField = {
  kind: "object",
  key: "credspec",
  fields: [
    { kind: "plugins", key: "CmsPlugins" },
    {
      kind: "object",
      key: "DomainJoinConfig",
      fields: [
        // S-1-5-21- and four sub-authorities of at most ten digits: 53 characters.
        string("Sid", { pattern: domainSidPattern, expected: DomainSid.name, maxLength: 64 }),
        string("MachineAccountName", nonEmpty),
        string("Guid", { pattern: guidPattern, expected: DomainGuid.name, maxLength: 36 }),
        string("DnsTreeName", { pattern: dnsNamePattern, expected: DnsName.name, maxLength: maxDnsNameLength }),
        string("DnsName", { pattern: dnsNamePattern, expected: DnsName.name, maxLength: maxDnsNameLength }),
        string("NetBiosName", { pattern: netBiosNamePattern, expected: NetBiosName.name, maxLength: 15 }),
      ],
    },
    {
      kind: "object",
      key: "ActiveDirectoryConfig",
      fields: [
        { kind: "accounts", key: "GroupManagedServiceAccounts" },
        {
          kind: "object",
          key: "HostAccountConfig",
          optional: true,
          fields: [
            string("PortableCcgVersion", nonEmpty),
            string("PluginGUID", { pattern: bracedGuidPattern, expected: PluginGuid.name, maxLength: 38 }),
            string("PluginInput", { expected: "a string" }),
          ],
        },
      ],
    },
  ],
};

/** The values of `map`'s keys spelled as `key` in any case: none, one, or (an error) several. */
const valuesOf = (map: string, key: string) => `${map}.filter(k, k.lowerAscii() == ${cel(key.toLowerCase())}).map(k, ${map}[k])`;

/** A CEL list of findings (`path: problem` strings) for one value that must be a string. */
function stringFinding(value: string, field: StringField, path: string): string {
  if (field.pattern && field.maxLength === undefined) throw new Error(`${path}: a pattern needs a length bound, or its cost is the string's`);
  const matches = field.pattern ? ` && size(${value}) <= ${field.maxLength} && ${value}.matches(${cel(re2(field.pattern))})` : "";
  return `(type(${value}) == string${matches} ? [] : [${cel(`${path}: must be ${field.expected}`)}])`;
}

/** What is wrong with a map's keys at one level: reserved, too long, outside ASCII, or repeated in another case. */
function keyFindings(map: string, path: string): string {
  const at = (problem: string) => `.map(k, ${cel(`${path}.`)} + k + ${cel(`: ${problem}`)})`;
  const reserved = `${map}.filter(k, k in ${JSON.stringify(reservedKeys).replace(/"/g, "'")})${at(reservedProblem)}`;
  const long = `${map}.filter(k, size(k) > ${maxKeyLength}).map(k, ${cel(`${path}.`)} + k.substring(0, ${maxKeyLength}) + ${cel(`…: ${longKeyProblem}`)})`;
  const nonAscii = `${map}.filter(k, size(k) <= ${maxKeyLength} && !k.matches('^[\\\\x00-\\\\x7F]*$'))${at(nonAsciiProblem)}`;
  const repeated = `${map}.filter(k, size(k) <= ${maxKeyLength} && ${map}.filter(j, j.lowerAscii() == k.lowerAscii()).size() > 1)${at(repeatedProblem)}`;
  return `${reserved} + ${long} + ${nonAscii} + ${repeated}`;
}

interface Rendered {
  readonly variables: { name: string; expression: string }[];
  readonly findings: string[];
}

/**
 * Renders one object level: a variable holding the list of its values (the key in any case), and
 * the findings about it, each guarded so that a level is judged only when its parent is one object
 * (the webhook reports a missing parent, not every key under it).
 */
function renderObject(field: ObjectField, variable: string, path: string, out: Rendered): void {
  const values = `variables.${variable}`;
  const one = `${values}[0]`;
  const isOne = `size(${values}) == 1`;
  // An object with more keys than any spec needs is said so, and not judged further: the policy's cost stays bounded.
  const isObject = `${isOne} && type(${one}) == map && size(${one}) <= ${maxKeysPerObject}`;
  out.findings.push(
    `(size(${values}) == 0 ? ${field.optional ? "[]" : `[${cel(`${path}: is required`)}]`} : ${isOne} ? (type(${one}) == map ? [] : [${cel(`${path}: must be an object`)}]) : [])`,
    `(${isOne} && type(${one}) == map && size(${one}) > ${maxKeysPerObject} ? [${cel(`${path}: has `)} + string(size(${one})) + ${cel(` keys; an object of a credential spec has at most ${maxKeysPerObject}`)}] : [])`,
    `(${isObject} ? ${keyFindings(one, path)} : [])`,
  );
  for (const child of field.fields) {
    const childPath = `${path}.${child.key}`;
    const childVariable = `${variable}${child.key}`;
    out.variables.push({ name: childVariable, expression: `${isObject} ? ${valuesOf(one, child.key)} : []` });
    const childValues = `variables.${childVariable}`;
    const childOne = `${childValues}[0]`;
    if (child.kind === "object") {
      renderObject(child, childVariable, childPath, out);
      continue;
    }
    // Repeated keys were found by the parent; a missing child is found here.
    const required = child.kind === "string" || child.kind === "plugins" || child.kind === "accounts";
    const missing = required ? `(${isObject} && size(${childValues}) == 0 ? [${cel(`${childPath}: is required`)}] : [])` : "[]";
    const judged = `size(${childValues}) == 1`;
    if (child.kind === "string") out.findings.push(missing, `(${judged} ? ${stringFinding(childOne, child, childPath)} : [])`);
    if (child.kind === "plugins") {
      const ok = `type(${childOne}) == list && size(${childOne}) <= ${maxCmsPlugins} && ${childOne}.all(p, type(p) == string) && 'ActiveDirectory' in ${childOne}`;
      out.findings.push(missing, `(${judged} && !(${ok}) ? [${cel(`${childPath}: must be ${CmsPlugins.name}`)}] : [])`);
    }
    if (child.kind === "accounts") {
      out.findings.push(missing, `(${judged} ? ${accountFindings(childOne, childPath)} : [])`);
    }
  }
}

/** GroupManagedServiceAccounts: a non-empty list of objects with a Name and a Scope, keys in any case. */
function accountFindings(list: string, path: string): string {
  const notList = `(type(${list}) != list || size(${list}) == 0 ? [${cel(`${path}: must be ${GroupManagedServiceAccounts.name}`)}] : [])`;
  const tooMany = `(type(${list}) == list && size(${list}) > ${maxAccounts} ? [${cel(`${path}: has `)} + string(size(${list})) + ${cel(` entries; a credential spec lists at most ${maxAccounts} accounts`)}] : [])`;
  // Accounts are walked by position, from a list of positions written out (at most maxAccounts):
  // CEL has no index in its macros, and finding one by equality would cost the accounts' size.
  const at = (_account: string) => `${cel(`${path}[`)} + string(i) + ']'`;
  const positions = `[${Array.from({ length: maxAccounts }, (_, i) => i).join(", ")}]`;
  const perAccount = (problem: (account: string) => string) =>
    `(type(${list}) == list && size(${list}) <= ${maxAccounts} ? ${positions}.filter(i, i < size(${list})).map(i, ${problem(`${list}[i]`)}).filter(m, m != '') : [])`;
  // An account judged key by key: an object of at most the keys any spec needs.
  const judged = (a: string) => `type(${a}) == map && size(${a}) <= ${maxKeysPerObject}`;
  const checks = [
    perAccount((a) => `type(${a}) == map ? '' : ${at(a)} + ': must be an object'`),
    perAccount(
      (a) =>
        `type(${a}) == map && size(${a}) > ${maxKeysPerObject} ? ${at(a)} + ': has ' + string(size(${a})) + ${cel(` keys; an object of a credential spec has at most ${maxKeysPerObject}`)} : ''`,
    ),
    perAccount(
      (a) => `!(${judged(a)}) ? '' : ${a}.filter(k, k in ${JSON.stringify(reservedKeys).replace(/"/g, "'")}).size() > 0 ? ${at(a)} + ${cel(`: has ${reservedProblem}`)} : ''`,
    ),
    perAccount((a) => `!(${judged(a)}) ? '' : ${a}.exists(k, size(k) > ${maxKeyLength}) ? ${at(a)} + ${cel(`: has a key that ${longKeyProblem}`)} : ''`),
    perAccount(
      (a) =>
        `!(${judged(a)}) ? '' : ${a}.exists(k, size(k) <= ${maxKeyLength} && !k.matches('^[\\\\x00-\\\\x7F]*$')) ? ${at(a)} + ${cel(`: has a key that ${nonAsciiProblem}`)} : ''`,
    ),
    perAccount(
      (a) =>
        `!(${judged(a)}) ? '' : ${a}.exists(k, size(k) <= ${maxKeyLength} && ${a}.filter(j, j.lowerAscii() == k.lowerAscii()).size() > 1) ? ${at(a)} + ${cel(`: a key ${repeatedProblem}`)} : ''`,
    ),
  ];
  for (const key of ["Name", "Scope"]) {
    const values = (a: string) => valuesOf(a, key);
    checks.push(
      perAccount(
        (a) =>
          `!(${judged(a)}) ? '' : size(${values(a)}) == 0 ? ${at(a)} + ${cel(`.${key}: is required`)} : size(${values(a)}) == 1 && !(type(${values(a)}[0]) == string && size(${values(a)}[0]) <= ${nonEmpty.maxLength} && ${values(a)}[0].matches(${cel(re2(nonEmpty.pattern))})) ? ${at(a)} + ${cel(`.${key}: must be ${nonEmpty.expected}`)} : ''`,
      ),
    );
  }
  return [notList, tooMany, ...checks].join(" + ");
}

/** The policy's variables and the one expression listing every finding, as the webhook lists them. */
export function credSpecRules(): Rendered {
  const out: Rendered = { variables: [{ name: "credspec", expression: "has(object.credspec) ? [dyn(object.credspec)] : []" }], findings: [] };
  renderObject(credspec, "credspec", "credspec", out);
  return out;
}

/** The findings one refusal lists, as the webhook lists them. */
const maxListedFindings = maxListed;

export function safetyNetCredSpecObjects() {
  const rules = credSpecRules();
  const name = "(has(object.metadata.name) ? object.metadata.name : '')";
  return denyingPolicy(safetyNetCredSpecPolicyName, {
    matchConstraints: {
      resourceRules: [{ apiGroups: ["windows.k8s.io"], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["gmsacredentialspecs"] }],
    },
    // As the webhook: an UPDATE that leaves `credspec` as it was is not judged, so the labels
    // and finalizers of a spec that predates these rules stay manageable. Dry runs store
    // nothing and pass to the webhook, whose answer also carries its warnings.
    matchConditions: [
      { name: "not-a-dry-run", expression: "request.dryRun != true" },
      {
        name: "credspec-set-or-changed",
        expression: "request.operation == 'CREATE' || has(object.credspec) != has(oldObject.credspec) || (has(object.credspec) && object.credspec != oldObject.credspec)",
      },
    ],
    variables: [...rules.variables, { name: "findings", expression: rules.findings.join(" + ") }],
    validations: [
      {
        expression: "size(variables.findings) == 0",
        // As the webhook: the first few findings and how many more (a message has a bounded length, 5 KiB in the API server).
        messageExpression: `${cel(`${who}: GMSACredentialSpec "`)} + ${name} + '" is not a valid Windows credential spec: ' + [${Array.from({ length: maxListedFindings }, (_, i) => i).join(", ")}].filter(i, i < size(variables.findings)).map(i, variables.findings[i]).join('; ') + (size(variables.findings) > ${maxListedFindings} ? ' (and ' + string(size(variables.findings) - ${maxListedFindings}) + ' more)' : '')`,
        message: `${who}: the GMSACredentialSpec is not a valid Windows credential spec`,
        reason: "Invalid",
      },
    ],
  });
}
