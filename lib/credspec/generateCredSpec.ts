import { azureKeyVaultPluginGuid } from "./knownPlugins.js";

/** What `credspec generate` is told about the domain, the accounts and the plug-in. */
export interface GenerateRequest {
  readonly name: string;
  readonly dnsName: string;
  readonly netBiosName: string;
  readonly domainSid: string;
  readonly domainGuid: string;
  /** The gMSA the containers run as; also the MachineAccountName. */
  readonly account: string;
  readonly extraAccounts: readonly string[];
  /** The forest root's DNS name; the domain's own when absent. */
  readonly dnsTreeName?: string;
  readonly plugin?: PluginChoice;
}

export type PluginChoice =
  { readonly kind: "akv"; readonly secretUri: string; readonly objectId: string } | { readonly kind: "raw"; readonly guid: string; readonly input: string };

export type CredSpecDocument = {
  apiVersion: "windows.k8s.io/v1";
  kind: "GMSACredentialSpec";
  metadata: { name: string };
  credspec: unknown;
};

/**
 * The credential spec `New-CredentialSpec` would write for these facts: every account listed
 * once under the DNS name and once under the NetBIOS name, which is what lets the host find
 * it whichever form a service asks for. The result is checked by the caller like any other.
 */
export function generateCredSpec(request: GenerateRequest): CredSpecDocument {
  const accounts = [request.account, ...request.extraAccounts.filter((a) => a !== request.account)];
  const hostAccount = request.plugin ? { HostAccountConfig: hostAccountConfig(request.plugin) } : {};
  return credSpecDocument(request.name, {
    CmsPlugins: ["ActiveDirectory"],
    DomainJoinConfig: {
      Sid: request.domainSid,
      MachineAccountName: request.account,
      Guid: request.domainGuid,
      DnsTreeName: request.dnsTreeName ?? request.dnsName,
      DnsName: request.dnsName,
      NetBiosName: request.netBiosName,
    },
    ActiveDirectoryConfig: {
      GroupManagedServiceAccounts: accounts.flatMap((Name) => [
        { Name, Scope: request.dnsName },
        { Name, Scope: request.netBiosName },
      ]),
      ...hostAccount,
    },
  });
}

/** The Key Vault plug-in reads `ObjectId=<managed identity>;SecretUri=<secret>` (AKS documentation). */
function hostAccountConfig(plugin: PluginChoice) {
  if (plugin.kind === "akv") {
    return { PortableCcgVersion: "1", PluginGUID: azureKeyVaultPluginGuid, PluginInput: `ObjectId=${plugin.objectId};SecretUri=${plugin.secretUri}` };
  }
  return { PortableCcgVersion: "1", PluginGUID: plugin.guid, PluginInput: plugin.input };
}

export function credSpecDocument(name: string, credspec: unknown): CredSpecDocument {
  return { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name }, credspec };
}
