// A fleet's member secrets (the value each member's wiring presents: GMSA_CLUSTER_SECRET_<NAME>)
// in a Key Vault of their own, read by the webhooks' identity alone through Key Vault references.
// Why a vault and not plain app settings: docs/wiring.md ("Where the member secrets live").
// Authorization is Azure RBAC on the vault (no access policies); in private mode the vault has
// no public endpoint and the app reaches it through a private endpoint in the subnet that holds
// the storage endpoints (the one its NSG opens to the function subnet on 443).
param location string
param tags object
param resourceToken string

@description('Object ID of the identity the function app runs as: the only reader of the secrets.')
param principalId string

@description('The members, in the order of main\'s clusters parameter; each has its secret in clusterSecrets.')
param clusterNames array

@secure()
@description('Member name -> its secret (one value, 32 to 128 of A-Z a-z 0-9 _ -, at least 10 different; during a rotation "new,old").')
param clusterSecrets object

@description('private mode: no public network access; reached through the private endpoint only.')
param privateMode bool = false

@description('private mode: subnet of the private endpoint (the storage endpoints\' subnet).')
param endpointSubnetId string = ''

@description('private mode: the privatelink.vaultcore.azure.net zone.')
param dnsZoneId string = ''

// Reads secret contents, nothing else: no keys, certificates or management of the vault.
var keyVaultSecretsUserRoleId = '4633458b-17de-408a-b874-0445c86b69e6'

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: take('kv-gmsa-${resourceToken}', 24)
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 7
    // No purge protection: the secrets are parameters of this deployment, so a deleted vault is
    // rebuilt from them; purge protection would block `azd down --purge` and a redeploy of the
    // same name for the whole retention period.
    publicNetworkAccess: privateMode ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: privateMode ? 'Deny' : 'Allow'
      bypass: privateMode ? 'None' : 'AzureServices'
    }
  }
}

// A member's secret whose value does not parse is refused when the app starts, naming the
// setting, never the value.
resource secret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = [
  for name in clusterNames: {
    parent: vault
    name: 'cluster-secret-${name}'
    properties: {
      value: clusterSecrets[name]
      contentType: 'gmsa-admission member secret (GMSA_CLUSTER_SECRET_${toUpper(replace(name, '-', '_'))})'
    }
  }
]

resource secretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, principalId, keyVaultSecretsUserRoleId)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUserRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource endpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = if (privateMode) {
  name: 'pe-kv-${resourceToken}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: endpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'vault'
        properties: {
          privateLinkServiceId: vault.id
          groupIds: [
            'vault'
          ]
        }
      }
    ]
  }
}

resource endpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = if (privateMode) {
  parent: endpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'privatelink-vaultcore'
        properties: {
          privateDnsZoneId: dnsZoneId
        }
      }
    ]
  }
}

output name string = vault.name
// With their versions: a new secret is a new URI, so the app setting changes and the app takes
// the new value at once, instead of whenever it next refreshes an unversioned reference.
output referenceUris array = [for (name, index) in clusterNames: secret[index].properties.secretUriWithVersion]
