import { isLeft } from "fp-ts/Either";
import { WindowsCredSpec } from "./credSpecCodec.js";
import { findingsOf, type Finding } from "./credSpecFindings.js";
import { withDocumentedKeyCase } from "./credSpecKeyCase.js";
import { isKnownCcgPlugin, knownCcgPlugins } from "./knownPlugins.js";

export interface CredSpecReport {
  /** What makes it no Windows credential spec at all: the webhook refuses, lint fails. */
  readonly errors: readonly Finding[];
  /** What is legal but almost certainly a mistake. */
  readonly warnings: readonly Finding[];
}

/**
 * Every check on a credential spec's contents, the one source for the webhook and the command
 * line. `root` is the path the findings start from: `credspec` inside a GMSACredentialSpec.
 */
export function checkCredSpec(value: unknown, root = "credspec"): CredSpecReport {
  if (value === undefined || value === null) return { errors: [{ path: root, problem: "is required" }], warnings: [] };
  if (typeof value !== "object" || Array.isArray(value)) return { errors: [{ path: root, problem: "must be an object" }], warnings: [] };
  const reserved = reservedKeyPaths(value, root);
  if (reserved.length > 0) return { errors: reserved.map((path) => ({ path, problem: reservedKeyProblem })), warnings: [] };
  const respelled = withDocumentedKeyCase(value, root);
  if (respelled.errors.length > 0) return { errors: respelled.errors, warnings: respelled.warnings };
  const decoded = WindowsCredSpec.decode(respelled.value);
  if (isLeft(decoded)) return { errors: findingsOf(decoded.left, root), warnings: respelled.warnings };
  return { errors: [], warnings: [...respelled.warnings, ...suspicions(decoded.right, root)] };
}

/**
 * Keys that JavaScript objects treat as their own machinery. A spec whose keys exist only under
 * `"__proto__"` would otherwise be read through the prototype: its checks pass on fields that no
 * Windows host sees. No credential spec key is spelled like these, so they are refused wherever
 * they appear.
 */
export const reservedCredSpecKeys: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);
export const reservedKeyProblem = "is a reserved key (__proto__, constructor and prototype are no credential spec keys); remove it";

/**
 * Where such keys are, at any depth (the first few). It never recurses and builds a path only for
 * what it reports: an object may nest hundreds of thousands of levels within the body limit.
 */
function reservedKeyPaths(value: unknown, root: string, max = 10): string[] {
  interface Step {
    readonly value: unknown;
    readonly parent: Step | undefined;
    /** The key or index that leads here from the parent (the root's name at the root), written only for a message. */
    readonly segment: string | number;
    /** Levels below the root. */
    readonly depth: number;
    /** The step at the last level a message names from the root down, once the path is that deep. */
    top: Step | undefined;
  }
  const headSegments = 6;
  const tailSegments = 5;
  const stepOf = (parent: Step | undefined, segment: string | number, child: unknown): Step => {
    const depth = parent === undefined ? 0 : parent.depth + 1;
    const step: Step = { value: child, parent, segment, depth, top: parent?.top };
    if (depth === headSegments - 1) step.top = step;
    return step;
  };
  const segmentsUp = (from: Step | undefined, count: number): string => {
    const segments: string[] = [];
    for (let at = from; at !== undefined && segments.length < count; at = at.parent) {
      segments.push(at.parent === undefined ? String(at.segment) : typeof at.segment === "number" ? `[${at.segment}]` : `.${at.segment}`);
    }
    return segments.reverse().join("");
  };
  // A message names the place, not every level of a made-up nesting: a path of more than twelve
  // segments is written as its first six and last five, without walking the levels between.
  const pathOf = (step: Step): string => {
    const segments = step.depth + 1;
    if (segments <= 12) return segmentsUp(step, segments);
    return `${segmentsUp(step.top, headSegments)}\u2026(${segments - headSegments - tailSegments} levels)\u2026${segmentsUp(step, tailSegments)}`;
  };
  const found: string[] = [];
  const pending: Step[] = [stepOf(undefined, root, value)];
  // Only objects and arrays are walked: a leaf holds no key (most of a spec is leaves).
  const holdsKeys = (child: unknown) => typeof child === "object" && child !== null;
  while (pending.length > 0 && found.length < max) {
    const step = pending.pop()!;
    const next = step.value as object;
    if (Array.isArray(next)) {
      for (let i = next.length - 1; i >= 0; i--) if (holdsKeys(next[i])) pending.push(stepOf(step, i, next[i]));
      continue;
    }
    const keys = Object.keys(next);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const child: unknown = (next as Record<string, unknown>)[key];
      if (reservedCredSpecKeys.has(key)) found.push(pathOf(stepOf(step, key, child)));
      else if (holdsKeys(child)) pending.push(stepOf(step, key, child));
    }
  }
  return found;
}

function suspicions(spec: WindowsCredSpec, root: string): Finding[] {
  const join = `${root}.DomainJoinConfig`;
  const accounts = `${root}.ActiveDirectoryConfig.GroupManagedServiceAccounts`;
  const { Sid, MachineAccountName, DnsName, DnsTreeName, NetBiosName } = spec.DomainJoinConfig;
  const dnsName = withoutTrailingDot(DnsName).toLowerCase();
  const netBios = NetBiosName.toUpperCase();
  const found: Finding[] = [];
  const warn = (path: string, problem: string) => found.push({ path, problem });

  if (Sid.split("-").length > 7) warn(`${join}.Sid`, "has a fourth sub-authority: that is an account's SID; the domain's SID ends one part earlier");
  const names = spec.ActiveDirectoryConfig.GroupManagedServiceAccounts;
  if (!names.some((account) => account.Name.toLowerCase() === MachineAccountName.toLowerCase())) {
    warn(`${join}.MachineAccountName`, "is not the Name of any of ActiveDirectoryConfig.GroupManagedServiceAccounts");
  }
  const scopes = new Set(names.map((account) => withoutTrailingDot(account.Scope).toLowerCase()));
  if (!scopes.has(dnsName)) warn(accounts, "no entry has DomainJoinConfig.DnsName as its Scope; list the account once for the DNS name and once for the NetBIOS name");
  if (!scopes.has(NetBiosName.toLowerCase()))
    warn(accounts, "no entry has DomainJoinConfig.NetBiosName as its Scope; list the account once for the DNS name and once for the NetBIOS name");
  if (NetBiosName !== netBios) warn(`${join}.NetBiosName`, "is not upper case, as Active Directory writes NetBIOS domain names");
  // The two names swapped, or the DNS name given twice: the commonest mix-up of the two fields.
  if (!dnsName.includes(".")) warn(`${join}.DnsName`, "is a single label: an Active Directory domain's DNS name has dots (contoso.com); is this the NetBIOS name?");
  if (NetBiosName.includes(".")) warn(`${join}.NetBiosName`, "has a dot: a NetBIOS domain name has none (CONTOSO); is this the DNS name?");
  const firstLabel = dnsName.split(".")[0]!.toUpperCase();
  if (!firstLabel.startsWith(netBios) && !netBios.startsWith(firstLabel)) {
    warn(`${join}.NetBiosName`, "does not resemble the first label of DomainJoinConfig.DnsName; check that it is the NetBIOS name of the same domain");
  }
  const tree = withoutTrailingDot(DnsTreeName).toLowerCase();
  if (dnsName !== tree && !dnsName.endsWith(`.${tree}`)) warn(`${join}.DnsTreeName`, "is not DomainJoinConfig.DnsName or a parent domain of it (the forest root)");

  const host = spec.ActiveDirectoryConfig.HostAccountConfig;
  if (host) {
    const hostPath = `${root}.ActiveDirectoryConfig.HostAccountConfig`;
    if (!isKnownCcgPlugin(host.PluginGUID)) {
      warn(
        `${hostPath}.PluginGUID`,
        `is none of the documented plug-ins (${knownCcgPlugins.map((p) => `${p.guid} ${p.description}`).join("; ")}); a mistyped GUID fails only on the node`,
      );
    }
    if (carriesPassword(host.PluginInput)) {
      warn(
        `${hostPath}.PluginInput`,
        "appears to carry a password inline; anyone who may get credential specs can read it: keep it in the plug-in's secret store and pass only a reference",
      );
    }
  }
  return found;
}

function withoutTrailingDot(name: string): string {
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

/** A `password=`, `pwd:` or `"password":` style key in the plug-in's input. */
// One run of white space on either side of an optional quote: two adjacent \s* would make a long
// run of spaces after the word cost quadratic time (seconds for 100 000 spaces).
const passwordKey = /(?:^|[^a-z])(?:password|passwd|pwd)\s*(?:["']\s*)?[=:]/i;

export function carriesPassword(pluginInput: string): boolean {
  return passwordKey.test(pluginInput);
}
