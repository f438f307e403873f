import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";

/**
 * The Windows credential spec as io-ts codecs: the JSON that `New-CredentialSpec` writes and that
 * the container runtime hands to the Windows host (Microsoft: "Create gMSAs for Windows
 * containers", and the CCG plug-in interface ICcgDomainAuthCredentials for HostAccountConfig;
 * see docs/credspecs.md). Each codec's name is what a refusal says is wrong, so a name
 * describes the expected form and never needs the value itself.
 */

/** At most `max` characters, counted as code points (as the in-cluster policy's CEL counts them). */
export function withinLength(text: string, max: number): boolean {
  if (text.length <= max) return true;
  let count = 0;
  for (const _ of text) if (++count > max) return false;
  return true;
}

/**
 * The longest value of a free-text field (account names, scopes, the plug-in's version) and of a
 * DNS name: far above any real one, so that the in-cluster policy's pattern checks stay within
 * the API server's cost budget, and the two agree on every spec.
 */
export const maxTextLength = 256;
export const maxDnsNameLength = 255;

function patterned(name: string, pattern: RegExp, maxLength = Number.POSITIVE_INFINITY) {
  const is = (u: unknown): u is string => typeof u === "string" && withinLength(u, maxLength) && pattern.test(u);
  return new t.Type<string, string, unknown>(name, is, (u, c) => (is(u) ? t.success(u) : t.failure(u, c)), t.identity);
}

const subAuthority =
  "(?:[0-9]|[1-9][0-9]{1,8}|[1-3][0-9]{9}|4[0-1][0-9]{8}|42[0-8][0-9]{7}|429[0-3][0-9]{6}|4294[0-8][0-9]{5}|42949[0-5][0-9]{4}|429496[0-6][0-9]{3}|4294967[0-1][0-9]{2}|42949672[0-8][0-9]|429496729[0-5])";

/** S-1-5-21 and three sub-authorities; a fourth (an account's RID) is legal here and warned about. */
export const domainSidPattern = new RegExp(`^S-1-5-21-${subAuthority}-${subAuthority}-${subAuthority}(-${subAuthority})?$`, "i");
const hex = (n: number) => `[0-9A-Fa-f]{${n}}`;
const guid = `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`;
export const guidPattern = new RegExp(`^${guid}$`);
export const bracedGuidPattern = new RegExp(`^\\{${guid}\\}$`);
/** Letters, digits, hyphens and underscores in dot-separated labels (a trailing dot allowed). */
export const dnsNamePattern = /^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?$/;
/** 1 to 15 characters (code points, as the in-cluster policy counts them), none of those Windows forbids in a NetBIOS name. */
export const netBiosNamePattern = /^[^\\/:*?"<>|\s]{1,15}$/u;

export const NonEmpty = patterned(`a non-empty string of at most ${maxTextLength} characters`, /\S/, maxTextLength);

export const DomainSid = patterned("a domain SID (S-1-5-21- followed by three sub-authorities)", domainSidPattern);
export const DomainGuid = patterned("a GUID without braces (8-4-4-4-12 hexadecimal digits)", guidPattern);
export const PluginGuid = patterned("a GUID in braces ({8-4-4-4-12 hexadecimal digits})", bracedGuidPattern);
export const DnsName = patterned(`a DNS name (dot-separated labels of letters, digits and hyphens; at most ${maxDnsNameLength} characters)`, dnsNamePattern, maxDnsNameLength);
export const NetBiosName = patterned('a NetBIOS name (1 to 15 characters, no spaces or \\ / : * ? " < > |)', netBiosNamePattern);

/** The most plug-ins a spec lists (it needs one). */
export const maxCmsPlugins = 16;

const pluginItems = t.array(t.string);
const pluginListOk = (plugins: string[]) => plugins.length <= maxCmsPlugins && plugins.includes("ActiveDirectory");

/**
 * The plug-in list the runtime reads: it must name the Active Directory plug-in. A list past the
 * bound is refused before its items are read, in the words of the whole list (as the in-cluster
 * policy words it): a body of millions of items would otherwise be decoded item by item, seconds
 * of one instance's CPU for one admission. Still a refinement of a list, so that a finding names
 * an item as `CmsPlugins[1]`.
 */
export const CmsPlugins = new t.RefinementType<typeof pluginItems>(
  `a list of at most ${maxCmsPlugins} strings that contains "ActiveDirectory"`,
  (value): value is string[] => pluginItems.is(value) && pluginListOk(value),
  (input, context) => {
    if (Array.isArray(input) && input.length > maxCmsPlugins) return t.failure(input, context);
    const items = pluginItems.validate(input, context);
    return isLeft(items) || pluginListOk(items.right) ? items : t.failure(input, context);
  },
  pluginItems.encode,
  pluginItems,
  pluginListOk,
);

export const DomainJoinConfig = t.type({
  Sid: DomainSid,
  MachineAccountName: NonEmpty,
  Guid: DomainGuid,
  DnsTreeName: DnsName,
  DnsName: DnsName,
  NetBiosName: NetBiosName,
});

export const GroupManagedServiceAccount = t.type({ Name: NonEmpty, Scope: NonEmpty });

export const GroupManagedServiceAccounts = t.refinement(t.array(GroupManagedServiceAccount), (accounts) => accounts.length > 0, "a non-empty list of {Name, Scope}");

/** Non-domain-joined hosts: the CCG plug-in that fetches the credentials that retrieve the gMSA. */
export const HostAccountConfig = t.type({
  PortableCcgVersion: NonEmpty,
  PluginGUID: PluginGuid,
  PluginInput: t.string,
});

export const ActiveDirectoryConfig = t.intersection([t.type({ GroupManagedServiceAccounts }), t.partial({ HostAccountConfig })]);

export const WindowsCredSpec = t.type({
  CmsPlugins,
  DomainJoinConfig,
  ActiveDirectoryConfig,
});
export type WindowsCredSpec = t.TypeOf<typeof WindowsCredSpec>;

/** The Kubernetes object around it; `credspec` is checked separately so its absence reads plainly. */
export const GmsaCredentialSpecObject = t.intersection([
  t.type({
    apiVersion: t.string,
    kind: t.literal("GMSACredentialSpec"),
    metadata: t.intersection([t.type({ name: t.string }), t.partial({})]),
  }),
  t.partial({ credspec: t.unknown }),
]);
export type GmsaCredentialSpecObject = t.TypeOf<typeof GmsaCredentialSpecObject>;

/** The most keys one object of a credential spec may have, and the most accounts it may list: far above any real spec. */
export const maxKeysPerObject = 32;
/** The longest key of an object of a credential spec (the documented ones have at most 19 characters). */
export const maxKeyLength = 64;
export const maxAccounts = 64;

/** Every key the codecs read, by the object it sits in: the spellings key-case checks compare to. */
export const knownKeys: Readonly<Record<string, readonly string[]>> = {
  "": ["CmsPlugins", "DomainJoinConfig", "ActiveDirectoryConfig"],
  DomainJoinConfig: ["Sid", "MachineAccountName", "Guid", "DnsTreeName", "DnsName", "NetBiosName"],
  ActiveDirectoryConfig: ["GroupManagedServiceAccounts", "HostAccountConfig"],
  GroupManagedServiceAccounts: ["Name", "Scope"],
  HostAccountConfig: ["PortableCcgVersion", "PluginGUID", "PluginInput"],
};
