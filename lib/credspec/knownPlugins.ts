/**
 * CCG plug-ins documented for managed Kubernetes offerings; a PluginGUID outside this list is
 * legal (any registered COM class can be a plug-in) but is far more often a typo.
 * Sources: AKS "Enable Group Managed Service Accounts (GMSA) for your Windows Server nodes"
 * (the Azure Key Vault plug-in, CCGAKVPlugin.dll); AWS "Using gMSA for Windows containers"
 * (domainless gMSA, Amazon ECS/EKS developer guides). See docs/credspecs.md.
 */
export const knownCcgPlugins: ReadonlyArray<{ readonly guid: string; readonly description: string }> = [
  { guid: "{CCC2A336-D7F3-4818-A213-272B7924213E}", description: "Azure Key Vault plug-in (AKS)" },
  { guid: "{859E1386-BDB4-49E8-85C7-3070B13920E1}", description: "AWS Secrets Manager / SSM plug-in (EKS, ECS)" },
];

export const azureKeyVaultPluginGuid = knownCcgPlugins[0]!.guid;

export function isKnownCcgPlugin(guid: string): boolean {
  return knownCcgPlugins.some((plugin) => plugin.guid.toUpperCase() === guid.toUpperCase());
}
