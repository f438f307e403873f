// One direction of a VNet peering, created in the resource group of the local VNet.
@description('Name of the VNet (in this resource group) that gets the peering.')
param localVnetName string

@description('Resource ID of the VNet to peer with.')
param remoteVnetId string

param peeringName string

resource localVnet 'Microsoft.Network/virtualNetworks@2024-05-01' existing = {
  name: localVnetName
}

resource peering 'Microsoft.Network/virtualNetworks/virtualNetworkPeerings@2024-05-01' = {
  parent: localVnet
  name: peeringName
  properties: {
    remoteVirtualNetwork: {
      id: remoteVnetId
    }
    allowVirtualNetworkAccess: true
    allowForwardedTraffic: false
    allowGatewayTransit: false
    useRemoteGateways: false
  }
}
