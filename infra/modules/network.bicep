// private mode: a VNet for the function (outbound integration + private endpoint), a NAT
// gateway so its egress address is known (add it to the cluster's authorized IP ranges), and
// the private DNS zone of App Service, linked to this VNet and to the cluster's VNet.
param location string
param tags object
param resourceToken string
param vnetAddressPrefix string
param functionSubnetPrefix string
param privateEndpointSubnetPrefix string

@description('Resource ID of the cluster VNet. Empty: no link and no peering.')
param clusterVnetResourceId string = ''

param peerWithClusterVnet bool = true

var hasClusterVnet = !empty(clusterVnetResourceId)
var clusterVnetSegments = split(clusterVnetResourceId, '/')
var clusterVnetSubscriptionId = hasClusterVnet ? clusterVnetSegments[2] : subscription().subscriptionId
var clusterVnetResourceGroupName = hasClusterVnet ? clusterVnetSegments[4] : resourceGroup().name
var functionSubnetName = 'snet-function'
var privateEndpointSubnetName = 'snet-private-endpoints'

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
          privateEndpointNetworkPolicies: 'Disabled'
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

resource sitesDnsZone 'Microsoft.Network/privateDnsZones@2024-06-01' = {
  name: 'privatelink.azurewebsites.net'
  location: 'global'
  tags: tags
}

resource functionVnetLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = {
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

resource clusterVnetLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = if (hasClusterVnet) {
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
output privateDnsZoneId string = sitesDnsZone.id
output egressIpAddress string = egressIp.properties.ipAddress
