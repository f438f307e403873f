// Log Analytics workspace and a workspace-based Application Insights that accepts Entra
// (managed identity) telemetry only.
param location string
param tags object
param resourceToken string
param logRetentionDays int

@description('Object ID of the identity that publishes telemetry.')
param principalId string

var monitoringMetricsPublisherRoleId = '3913510d-42f4-4e42-8a64-420c390055eb'

module workspace 'br/public:avm/res/operational-insights/workspace:0.11.1' = {
  name: 'log-analytics'
  params: {
    name: 'log-gmsa-${resourceToken}'
    location: location
    tags: tags
    dataRetention: logRetentionDays
    enableTelemetry: false
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-gmsa-${resourceToken}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.outputs.resourceId
    IngestionMode: 'LogAnalytics'
    DisableLocalAuth: true
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, principalId, monitoringMetricsPublisherRoleId)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisherRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

output appInsightsId string = appInsights.id
output appInsightsName string = appInsights.name
output appInsightsConnectionString string = appInsights.properties.ConnectionString
output workspaceId string = workspace.outputs.resourceId
