/**
 * The Azure resource ID of a managed cluster, checked part by part so that a wrong setting is
 * named precisely rather than surfacing later as a 404 from Azure Resource Manager.
 */
export interface AksResourceId {
  readonly subscriptionId: string;
  readonly resourceGroup: string;
  readonly clusterName: string;
  /** The ID in its usual spelling, ready to append to the ARM endpoint. */
  readonly id: string;
}

export class AksResourceIdError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AksResourceIdError";
  }
}

const expectedShape = "/subscriptions/<subscription GUID>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<cluster>";
const guid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Azure's rules: resource groups take letters, digits, '_', '-', '.', '(' and ')', up to 90,
// not ending in '.'; managed clusters take letters, digits, '_' and '-', up to 63, starting and
// ending with a letter or digit.
const resourceGroupName = /^[\p{L}\p{N}_\-.()]{1,90}$/u;
const clusterNamePattern = /^[a-zA-Z0-9](?:[a-zA-Z0-9_-]{0,61}[a-zA-Z0-9])?$/;

export function parseAksResourceId(value: string): AksResourceId {
  const trimmed = value.trim();
  const fail = (problem: string) => new AksResourceIdError(`"${trimmed.slice(0, 300)}" is not the resource ID of a managed cluster: ${problem} (expected ${expectedShape})`);
  if (!trimmed.startsWith("/")) throw fail("it must start with /subscriptions/");
  const parts = trimmed.replace(/\/+$/, "").slice(1).split("/");
  if (parts.length !== 8) throw fail(`it has ${parts.length} path segments, not 8`);
  const [subscriptions, subscriptionId, resourceGroups, resourceGroup, providers, namespace, type, clusterName] = parts as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const keywords: Array<[string, string]> = [
    [subscriptions, "subscriptions"],
    [resourceGroups, "resourceGroups"],
    [providers, "providers"],
    [namespace, "Microsoft.ContainerService"],
    [type, "managedClusters"],
  ];
  for (const [found, wanted] of keywords) {
    // ARM compares these case-insensitively.
    if (found.toLowerCase() !== wanted.toLowerCase()) throw fail(`found "${found.slice(0, 60)}" where "${wanted}" belongs`);
  }
  if (!guid.test(subscriptionId)) throw fail(`the subscription ID "${subscriptionId.slice(0, 60)}" is not a GUID`);
  if (!resourceGroupName.test(resourceGroup) || resourceGroup.endsWith(".")) throw fail(`"${resourceGroup.slice(0, 100)}" is not a valid resource group name`);
  if (!clusterNamePattern.test(clusterName)) throw fail(`"${clusterName.slice(0, 100)}" is not a valid managed cluster name`);
  return {
    subscriptionId,
    resourceGroup,
    clusterName,
    id: `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroup}/providers/Microsoft.ContainerService/managedClusters/${clusterName}`,
  };
}
