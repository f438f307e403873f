// private mode: a VNet for the function (outbound integration + private endpoints), a NAT
// gateway so its egress address is known (add it to the cluster's authorized IP ranges), the
// private DNS zone of App Service, linked to this VNet and to the cluster's VNet, and those of
// blob and table storage, linked to this VNet only.
//
// Who reaches the site's private endpoint is decided by a network security group on its subnet:
// App Service does not evaluate access restrictions for traffic that arrives through a private
// endpoint, and a subnet applies NSG rules to private endpoints only with
// privateEndpointNetworkPolicies enabled. Without it, everything peered could call the webhooks.
param location string
param tags object
param resourceToken string
param vnetAddressPrefix string
param functionSubnetPrefix string
param privateEndpointSubnetPrefix string

@description('Subnet of the storage account\'s private endpoints (blob, table), reached from the function subnet only.')
param storageEndpointSubnetPrefix string

@description('Address prefixes that may reach the site\'s private endpoint over HTTPS: the API server subnet (url wiring) or the relay\'s subnets (relay wiring, keyed), and a deployment runner. Every other source is denied, peered or not.')
param privateEndpointAllowedSources array

@description('Resource ID of the cluster VNet. Empty: no link and no peering.')
param clusterVnetResourceId string = ''

param peerWithClusterVnet bool = true

@description('An existing privatelink.azurewebsites.net zone that already resolves for the cluster\'s VNet (a hub\'s, linked to it centrally). Given: the site\'s private endpoint registers there, and this deployment makes no zone of its own and links nothing to the cluster VNet (a second zone of that name linked to the same VNet fails: "overlapping namespaces"). Empty: its own zone, linked to the function VNet and the cluster VNet.')
param existingSitesDnsZoneId string = ''

@description('A fleet: the members\' secrets live in a Key Vault with a private endpoint, which the function resolves through this zone.')
param keyVaultEndpoint bool = false

var hasClusterVnet = !empty(clusterVnetResourceId)
var ownSitesZone = empty(existingSitesDnsZoneId)
var clusterVnetSegments = split(clusterVnetResourceId, '/')
var clusterVnetSubscriptionId = hasClusterVnet ? clusterVnetSegments[2] : subscription().subscriptionId
var clusterVnetResourceGroupName = hasClusterVnet ? clusterVnetSegments[4] : resourceGroup().name
var functionSubnetName = 'snet-function'
var privateEndpointSubnetName = 'snet-private-endpoints'
var storageEndpointSubnetName = 'snet-storage-endpoints'
// What the Functions host uses of its storage: blobs (keys, locks, the package) and a table
// (diagnostic events). No queue: nothing here is triggered by one.
var storageServices = [
  'blob'
  'table'
]

// The rule that makes the allow-list the only way in: the default rules would let the whole
// VNet, and every VNet peered with it, reach the endpoint.
var denyEveryOtherSource = {
  name: 'deny-every-other-source'
  properties: {
    priority: 4096
    direction: 'Inbound'
    access: 'Deny'
    protocol: '*'
    sourceAddressPrefix: '*'
    sourcePortRange: '*'
    destinationAddressPrefix: '*'
    destinationPortRange: '*'
  }
}

var allowCluster = [
  for (source, index) in privateEndpointAllowedSources: {
    name: 'allow-https-${index}'
    properties: {
      priority: 100 + index
      direction: 'Inbound'
      access: 'Allow'
      protocol: 'Tcp'
      sourceAddressPrefix: source
      sourcePortRange: '*'
      destinationAddressPrefix: privateEndpointSubnetPrefix
      destinationPortRange: '443'
    }
  }
]

var allowFunctionToStorage = {
  name: 'allow-function-subnet'
  properties: {
    priority: 100
    direction: 'Inbound'
    access: 'Allow'
    protocol: 'Tcp'
    sourceAddressPrefix: functionSubnetPrefix
    sourcePortRange: '*'
    destinationAddressPrefix: storageEndpointSubnetPrefix
    destinationPortRange: '443'
  }
}

resource egressIp 'Microsoft.Network/publicIPAddresses@2024-05-01' = {
  name: 'pip-gmsa-egress-${resourceToken}'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    publicIPAllocationMethod: 'Static'
    publicIPAddressVersion: 'IPv4'
  }
}

resource natGateway 'Microsoft.Network/natGateways@2024-05-01' = {
  name: 'ng-gmsa-${resourceToken}'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    idleTimeoutInMinutes: 4
    publicIpAddresses: [
      {
        id: egressIp.id
      }
    ]
  }
}

resource privateEndpointNsg 'Microsoft.Network/networkSecurityGroups@2024-05-01' = {
  name: 'nsg-gmsa-pe-${resourceToken}'
  location: location
  tags: tags
  properties: {
    securityRules: concat(allowCluster, [denyEveryOtherSource])
  }
}

resource storageEndpointNsg 'Microsoft.Network/networkSecurityGroups@2024-05-01' = {
  name: 'nsg-gmsa-storage-pe-${resourceToken}'
  location: location
  tags: tags
  properties: {
    securityRules: [
      allowFunctionToStorage
      denyEveryOtherSource
    ]
  }
}

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: 'vnet-gmsa-${resourceToken}'
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        vnetAddressPrefix
      ]
    }
    subnets: [
      {
        name: functionSubnetName
        properties: {
          addressPrefix: functionSubnetPrefix
          natGateway: {
            id: natGateway.id
          }
          // Flex Consumption integrates through a subnet delegated to Container Apps environments.
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: privateEndpointSubnetName
        properties: {
          addressPrefix: privateEndpointSubnetPrefix
          // Without this, NSG rules do not apply to the private endpoints in the subnet.
          privateEndpointNetworkPolicies: 'Enabled'
          networkSecurityGroup: {
            id: privateEndpointNsg.id
          }
        }
      }
      {
        name: storageEndpointSubnetName
        properties: {
          addressPrefix: storageEndpointSubnetPrefix
          privateEndpointNetworkPolicies: 'Enabled'
          networkSecurityGroup: {
            id: storageEndpointNsg.id
          }
        }
      }
    ]
  }
}

resource functionSubnet 'Microsoft.Network/virtualNetworks/subnets@2024-05-01' existing = {
  parent: vnet
  name: functionSubnetName
}

resource privateEndpointSubnet 'Microsoft.Network/virtualNetworks/subnets@2024-05-01' existing = {
  parent: vnet
  name: privateEndpointSubnetName
}

resource storageEndpointSubnet 'Microsoft.Network/virtualNetworks/subnets@2024-05-01' existing = {
  parent: vnet
  name: storageEndpointSubnetName
}

// The function reaches its storage through these zones; nothing else needs them.
resource storageDnsZones 'Microsoft.Network/privateDnsZones@2024-06-01' = [
  for service in storageServices: {
    name: 'privatelink.${service}.${environment().suffixes.storage}'
    location: 'global'
    tags: tags
  }
]

resource storageDnsLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [
  for index in range(0, length(storageServices)): {
    parent: storageDnsZones[index]
    name: 'link-${vnet.name}'
    location: 'global'
    tags: tags
    properties: {
      registrationEnabled: false
      virtualNetwork: {
        id: vnet.id
      }
    }
  }
]

// A fleet's Key Vault (cluster-secrets.bicep): the function resolves its member secrets through
// this zone; nothing else needs it.
resource keyVaultDnsZone 'Microsoft.Network/privateDnsZones@2024-06-01' = if (keyVaultEndpoint) {
  name: 'privatelink.vaultcore.azure.net'
  location: 'global'
  tags: tags
}

resource keyVaultDnsLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = if (keyVaultEndpoint) {
  parent: keyVaultDnsZone
  name: 'link-${vnet.name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource sitesDnsZone 'Microsoft.Network/privateDnsZones@2024-06-01' = if (ownSitesZone) {
  name: 'privatelink.azurewebsites.net'
  location: 'global'
  tags: tags
}

resource functionVnetLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = if (ownSitesZone) {
  parent: sitesDnsZone
  name: 'link-${vnet.name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource clusterVnetLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = if (ownSitesZone && hasClusterVnet) {
  parent: sitesDnsZone
  name: 'link-cluster-${hasClusterVnet ? last(clusterVnetSegments) : 'none'}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: clusterVnetResourceId
    }
  }
}

resource peeringToCluster 'Microsoft.Network/virtualNetworks/virtualNetworkPeerings@2024-05-01' = if (hasClusterVnet && peerWithClusterVnet) {
  parent: vnet
  name: 'to-cluster'
  properties: {
    remoteVirtualNetwork: {
      id: clusterVnetResourceId
    }
    allowVirtualNetworkAccess: true
    allowForwardedTraffic: false
    allowGatewayTransit: false
    useRemoteGateways: false
  }
}

module peeringFromCluster 'vnet-peering.bicep' = if (hasClusterVnet && peerWithClusterVnet) {
  name: 'peering-from-cluster-${resourceToken}'
  scope: resourceGroup(clusterVnetSubscriptionId, clusterVnetResourceGroupName)
  params: {
    localVnetName: hasClusterVnet ? last(clusterVnetSegments) : ''
    remoteVnetId: vnet.id
    peeringName: 'to-gmsa-${resourceToken}'
  }
}

output vnetId string = vnet.id
output functionSubnetId string = functionSubnet.id
output privateEndpointSubnetId string = privateEndpointSubnet.id
output privateDnsZoneId string = ownSitesZone ? sitesDnsZone.id : existingSitesDnsZoneId
output storageEndpointSubnetId string = storageEndpointSubnet.id
output blobDnsZoneId string = storageDnsZones[0].id
output tableDnsZoneId string = storageDnsZones[1].id
output keyVaultDnsZoneId string = keyVaultEndpoint ? keyVaultDnsZone.id : ''
output egressIpAddress string = egressIp.properties.ipAddress
