/**
 * Credential specs the webhook refuses and ones it admits with a warning, each one edit away from
 * a well-formed fixture: the unit tests judge them with checkCredSpec, the safety net's tests
 * send them through a real API server.
 */
export interface Variant {
  readonly what: string;
  readonly file?: string;
  readonly edit: (credspec: any) => void;
  readonly path: string;
  readonly problem: RegExp;
}

export const refused: Variant[] = [
  {
    what: "a section given twice in different cases (a case-blind reader may take the unchecked copy)",
    edit: (c) => (c.domainJoinConfig = { ...c.DomainJoinConfig, Sid: "S-1-5-21-1-2-3-4-5" }),
    path: "credspec.domainJoinConfig",
    problem: /more than once in different cases/,
  },
  {
    what: "a key given twice in different cases",
    edit: (c) => (c.DomainJoinConfig.NETBIOSNAME = "OTHER"),
    path: "credspec.DomainJoinConfig.NETBIOSNAME",
    problem: /more than once in different cases/,
  },
  { what: "credspec is a list", edit: () => {}, path: "credspec", problem: /must be an object/ },
  { what: "CmsPlugins without ActiveDirectory", edit: (c) => (c.CmsPlugins = ["Other"]), path: "credspec.CmsPlugins", problem: /contains "ActiveDirectory"/ },
  { what: "CmsPlugins missing", edit: (c) => delete c.CmsPlugins, path: "credspec.CmsPlugins", problem: /is required/ },
  { what: "a gMSA's SID with one sub-authority", edit: (c) => (c.DomainJoinConfig.Sid = "S-1-5-21-1004336348"), path: "credspec.DomainJoinConfig.Sid", problem: /domain SID/ },
  { what: "a well-known SID", edit: (c) => (c.DomainJoinConfig.Sid = "S-1-5-32-544"), path: "credspec.DomainJoinConfig.Sid", problem: /S-1-5-21-/ },
  { what: "a sub-authority above 32 bits", edit: (c) => (c.DomainJoinConfig.Sid = "S-1-5-21-4294967296-1-2"), path: "credspec.DomainJoinConfig.Sid", problem: /domain SID/ },
  { what: "MachineAccountName empty", edit: (c) => (c.DomainJoinConfig.MachineAccountName = " "), path: "credspec.DomainJoinConfig.MachineAccountName", problem: /non-empty/ },
  { what: "Guid in braces", edit: (c) => (c.DomainJoinConfig.Guid = `{${c.DomainJoinConfig.Guid}}`), path: "credspec.DomainJoinConfig.Guid", problem: /GUID without braces/ },
  { what: "Guid mistyped", edit: (c) => (c.DomainJoinConfig.Guid = "244818ae-87ca-4fcd-92ec-e79e5252348"), path: "credspec.DomainJoinConfig.Guid", problem: /GUID/ },
  { what: "DnsName a URL", edit: (c) => (c.DomainJoinConfig.DnsName = "https://contoso.com"), path: "credspec.DomainJoinConfig.DnsName", problem: /DNS name/ },
  { what: "DnsTreeName missing", edit: (c) => delete c.DomainJoinConfig.DnsTreeName, path: "credspec.DomainJoinConfig.DnsTreeName", problem: /is required/ },
  {
    what: "NetBiosName longer than 15 characters",
    edit: (c) => (c.DomainJoinConfig.NetBiosName = "CONTOSOWORLDWIDE"),
    path: "credspec.DomainJoinConfig.NetBiosName",
    problem: /1 to 15 characters/,
  },
  {
    what: "a DNS name where the NetBIOS name belongs, with a dot and too long",
    edit: (c) => (c.DomainJoinConfig.NetBiosName = "contoso.example.com"),
    path: "credspec.DomainJoinConfig.NetBiosName",
    problem: /NetBIOS name/,
  },
  { what: "DomainJoinConfig missing", edit: (c) => delete c.DomainJoinConfig, path: "credspec.DomainJoinConfig", problem: /is required/ },
  {
    what: "no accounts",
    edit: (c) => (c.ActiveDirectoryConfig.GroupManagedServiceAccounts = []),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts",
    problem: /non-empty list/,
  },
  {
    what: "an account without Scope",
    edit: (c) => delete c.ActiveDirectoryConfig.GroupManagedServiceAccounts[1].Scope,
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts[1].Scope",
    problem: /is required/,
  },
  {
    what: "an account that is a string",
    edit: (c) => (c.ActiveDirectoryConfig.GroupManagedServiceAccounts[0] = "WebApplication1"),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts[0]",
    problem: /an object/,
  },
  { what: "ActiveDirectoryConfig missing", edit: (c) => delete c.ActiveDirectoryConfig, path: "credspec.ActiveDirectoryConfig", problem: /is required/ },
  {
    what: "PluginGUID without braces",
    file: "aks-keyvault.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginGUID = "CCC2A336-D7F3-4818-A213-272B7924213E"),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID",
    problem: /GUID in braces/,
  },
  {
    what: "a Key Vault secret URI where the plug-in GUID belongs",
    file: "aks-keyvault.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginGUID = "https://kv-payroll.vault.azure.net/secrets/gmsa-reader"),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID",
    problem: /GUID in braces/,
  },
  {
    what: "PluginInput an object (as ECS task files write it)",
    file: "eks-domainless.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginInput = { credentialArn: "arn:aws:secretsmanager:eu-west-1:1:secret:x" }),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput",
    problem: /a string/,
  },
  {
    what: "PortableCcgVersion missing",
    file: "eks-domainless.yaml",
    edit: (c) => delete c.ActiveDirectoryConfig.HostAccountConfig.PortableCcgVersion,
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PortableCcgVersion",
    problem: /is required/,
  },
  {
    what: "a key outside ASCII, which some readers fold to a documented one (ſid is SID to them)",
    edit: (c) => (c.DomainJoinConfig["ſid"] = "S-1-5-21-1-2-3"),
    path: "credspec.DomainJoinConfig.ſid",
    problem: /not an ASCII key/,
  },
  {
    what: "a SID whose S is a long s (ſ), which RE2's case folding would take for S",
    edit: (c) => (c.DomainJoinConfig.Sid = String(c.DomainJoinConfig.Sid).replace(/^S/, "ſ")),
    path: "credspec.DomainJoinConfig.Sid",
    problem: /domain SID/,
  },
  {
    what: "a NetBIOS name with a vertical tab",
    edit: (c) => (c.DomainJoinConfig.NetBiosName = "CON\vTOSO"),
    path: "credspec.DomainJoinConfig.NetBiosName",
    problem: /NetBIOS name/,
  },
  {
    what: "a machine account name of white space only (a no-break space)",
    edit: (c) => (c.DomainJoinConfig.MachineAccountName = "\u00a0"),
    path: "credspec.DomainJoinConfig.MachineAccountName",
    problem: /non-empty/,
  },
  {
    what: "an object with more keys than any spec needs",
    edit: (c) => Object.assign(c.DomainJoinConfig, Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`Extra${i}`, "x"]))),
    path: "credspec.DomainJoinConfig",
    problem: /has 46 keys; an object of a credential spec has at most 32/,
  },
  {
    what: "more accounts than any spec lists",
    edit: (c) => (c.ActiveDirectoryConfig.GroupManagedServiceAccounts = Array.from({ length: 65 }, (_, i) => ({ Name: `account${i}`, Scope: "contoso.com" }))),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts",
    problem: /has 65 entries; a credential spec lists at most 64 accounts/,
  },
  {
    what: "a machine account name longer than any real one",
    edit: (c) => (c.DomainJoinConfig.MachineAccountName = "a".repeat(257)),
    path: "credspec.DomainJoinConfig.MachineAccountName",
    problem: /a non-empty string of at most 256 characters/,
  },
  {
    what: "an account's Scope longer than any real one",
    edit: (c) => (c.ActiveDirectoryConfig.GroupManagedServiceAccounts[0].Scope = "x".repeat(300)),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts[0].Scope",
    problem: /at most 256 characters/,
  },
  {
    what: "a DNS name longer than 255 characters",
    edit: (c) => (c.DomainJoinConfig.DnsName = `${"a".repeat(60)}.`.repeat(5) + "com"),
    path: "credspec.DomainJoinConfig.DnsName",
    problem: /at most 255 characters/,
  },
  {
    what: "a key longer than any credential spec key",
    edit: (c) => (c.DomainJoinConfig["K".repeat(65)] = "x"),
    path: `credspec.DomainJoinConfig.${"K".repeat(64)}…`,
    problem: /more than 64 characters/,
  },
  {
    what: "more plug-ins than a spec needs",
    edit: (c) => (c.CmsPlugins = ["ActiveDirectory", ...Array.from({ length: 16 }, (_, i) => `Plugin${i}`)]),
    path: "credspec.CmsPlugins",
    problem: /at most 16 strings/,
  },
];

export const suspicious: Variant[] = [
  {
    what: "the NetBIOS name where the DNS name belongs (a single label)",
    edit: (c) => {
      c.DomainJoinConfig.DnsName = c.DomainJoinConfig.NetBiosName;
      c.DomainJoinConfig.DnsTreeName = c.DomainJoinConfig.NetBiosName;
    },
    path: "credspec.DomainJoinConfig.DnsName",
    problem: /is a single label: .*is this the NetBIOS name\?/,
  },
  {
    what: "the DNS name where the NetBIOS name belongs (a dot)",
    edit: (c) => (c.DomainJoinConfig.NetBiosName = String(c.DomainJoinConfig.DnsName).toUpperCase()),
    path: "credspec.DomainJoinConfig.NetBiosName",
    problem: /has a dot: .*is this the DNS name\?/,
  },
  { what: "an account's SID (a fourth sub-authority)", edit: (c) => (c.DomainJoinConfig.Sid += "-1105"), path: "credspec.DomainJoinConfig.Sid", problem: /fourth sub-authority/ },
  {
    what: "MachineAccountName not among the accounts",
    edit: (c) => (c.DomainJoinConfig.MachineAccountName = "WebApplication2"),
    path: "credspec.DomainJoinConfig.MachineAccountName",
    problem: /not the Name/,
  },
  {
    what: "one Scope only (DNS name)",
    edit: (c) => c.ActiveDirectoryConfig.GroupManagedServiceAccounts.pop(),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts",
    problem: /NetBiosName as its Scope/,
  },
  {
    what: "one Scope only (NetBIOS name)",
    edit: (c) => c.ActiveDirectoryConfig.GroupManagedServiceAccounts.shift(),
    path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts",
    problem: /DnsName as its Scope/,
  },
  { what: "NetBiosName in lower case", edit: (c) => (c.DomainJoinConfig.NetBiosName = "contoso"), path: "credspec.DomainJoinConfig.NetBiosName", problem: /upper case/ },
  {
    what: "NetBiosName of another domain",
    edit: (c) => (c.DomainJoinConfig.NetBiosName = "FABRIKAM"),
    path: "credspec.DomainJoinConfig.NetBiosName",
    problem: /does not resemble/,
  },
  {
    what: "DnsTreeName not a suffix of DnsName",
    edit: (c) => (c.DomainJoinConfig.DnsTreeName = "fabrikam.com"),
    path: "credspec.DomainJoinConfig.DnsTreeName",
    problem: /parent domain/,
  },
  {
    what: "DnsTreeName a child of DnsName",
    file: "eks-domainless.yaml",
    edit: (c) => ([c.DomainJoinConfig.DnsName, c.DomainJoinConfig.DnsTreeName] = [c.DomainJoinConfig.DnsTreeName, c.DomainJoinConfig.DnsName]),
    path: "credspec.DomainJoinConfig.DnsTreeName",
    problem: /parent domain/,
  },
  {
    what: "a PluginGUID of no documented plug-in",
    file: "aks-keyvault.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginGUID = "{CCC2A336-D7F3-4818-A213-272B7924213F}"),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID",
    problem: /none of the documented plug-ins/,
  },
  {
    what: "a password inline (key=value)",
    file: "aks-keyvault.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginInput = "Username=svc;Password=hunter2"),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput",
    problem: /password inline/,
  },
  {
    what: "a password inline (JSON)",
    file: "eks-domainless.yaml",
    edit: (c) => (c.ActiveDirectoryConfig.HostAccountConfig.PluginInput = '{"username":"svc","password":"hunter2","domainName":"shop.example.org"}'),
    path: "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput",
    problem: /password inline/,
  },
  {
    what: "a key in the wrong case",
    edit: (c) => ((c.DomainJoinConfig.SID = c.DomainJoinConfig.Sid), delete c.DomainJoinConfig.Sid),
    path: "credspec.DomainJoinConfig.SID",
    problem: /documented spelling is Sid/,
  },
  {
    what: "a section in the wrong case",
    edit: (c) => ((c.activeDirectoryConfig = c.ActiveDirectoryConfig), delete c.ActiveDirectoryConfig),
    path: "credspec.activeDirectoryConfig",
    problem: /documented spelling is ActiveDirectoryConfig/,
  },
];
