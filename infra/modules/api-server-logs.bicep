// The API server's own view of the webhooks, opt-in (main.bicep's apiServerLogs): the cluster's
// kube-apiserver log sent to the app's Log Analytics workspace, in the resource-specific table
// AKSControlPlane. When the API server cannot call a webhook (certificate, address, key, timeout)
// the function writes nothing; the API server's log still says so, and an alert reads it
// (admission-monitoring.bicep). Deployed in the cluster's resource group: the setting is an
// extension resource of the cluster.
@description('Name of the AKS managed cluster, in this deployment\'s resource group.')
param clusterName string

@description('Resource ID of the Log Analytics workspace that receives the log.')
param workspaceId string

resource aks 'Microsoft.ContainerService/managedClusters@2024-09-01' existing = {
  name: clusterName
}

resource apiServerLog 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'gmsa-admission-kube-apiserver'
  scope: aks
  properties: {
    workspaceId: workspaceId
    // Resource-specific tables (AKSControlPlane), not the shared AzureDiagnostics.
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      {
        category: 'kube-apiserver'
        enabled: true
      }
    ]
  }
}
