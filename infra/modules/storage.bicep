// Storage for the Functions host and for the deployment package. No shared keys: the
// identity reaches it through Entra ID only. In private mode it has no public endpoint at all:
// the app reaches it through private endpoints (storage-endpoints.bicep) from its integrated
// subnet, and Flex Consumption deployments upload the package the same way.
param location string
param tags object
param resourceToken string

@description('Object ID of the identity the function app runs as.')
param principalId string

@description('private mode: no public network access; reached through private endpoints only.')
param privateMode bool = false

var deploymentContainerName = 'app-package'

// The documented set for identity-based host storage without triggers that use it: blob
// ownership (keys, locks, the host's containers, the package) and table data (the host's
// diagnostic events). Nothing at the management plane, no queues.
var storageBlobDataOwnerRoleId = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageTableDataContributorRoleId = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: take('stgmsa${resourceToken}', 24)
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: privateMode ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: privateMode ? 'Deny' : 'Allow'
      bypass: privateMode ? 'None' : 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

// Scoped to the account: the host creates its own containers, so a container scope is too narrow.
resource blobDataOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, principalId, storageBlobDataOwnerRoleId)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwnerRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource tableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, principalId, storageTableDataContributorRoleId)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributorRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

output name string = account.name
output id string = account.id
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainer.name}'
