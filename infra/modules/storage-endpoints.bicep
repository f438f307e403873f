// private mode: the storage account's private endpoints for the services the Functions host
// uses (blob, table), in their own subnet, each registered in its private DNS zone.
param location string
param tags object
param resourceToken string

@description('Name of the storage account (this resource group).')
param storageAccountName string

@description('Subnet of the storage private endpoints.')
param subnetId string

@description('The privatelink.blob zone.')
param blobDnsZoneId string

@description('The privatelink.table zone.')
param tableDnsZoneId string

var endpoints = [
  {
    service: 'blob'
    zoneId: blobDnsZoneId
  }
  {
    service: 'table'
    zoneId: tableDnsZoneId
  }
]

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource endpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = [
  for target in endpoints: {
    name: 'pe-st-${target.service}-${resourceToken}'
    location: location
    tags: tags
    properties: {
      subnet: {
        id: subnetId
      }
      privateLinkServiceConnections: [
        {
          name: target.service
          properties: {
            privateLinkServiceId: account.id
            groupIds: [
              target.service
            ]
          }
        }
      ]
    }
  }
]

resource endpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [
  for (target, index) in endpoints: {
    parent: endpoint[index]
    name: 'default'
    properties: {
      privateDnsZoneConfigs: [
        {
          name: 'privatelink-${target.service}'
          properties: {
            privateDnsZoneId: target.zoneId
          }
        }
      ]
    }
  }
]
