// What the webhooks' identity may do on the existing AKS cluster. Deployed in the cluster's
// resource group.
param clusterName string

@description('Object ID of the webhooks\' identity.')
param principalId string

@description('The cluster authorizes Kubernetes requests with Azure RBAC.')
param clusterUsesAzureRbac bool

@description('Also allow subjectaccessreviews (checking the requesting user).')
param includeSubjectAccessReviews bool

@description('Narrow the custom-resource read to windows.k8s.io/gmsacredentialspecs with an ABAC condition.')
param restrictCustomResourceReads bool = true

@description('Keeps the custom role name unique per environment.')
param roleNameSuffix string

var clusterUserRoleId = '4abbcc35-e782-43d8-92c5-2d3f1bd2253f'
var customRoleScope = resourceGroup().id

// Azure RBAC for Kubernetes names built-in API groups in its data actions; custom resources
// (gmsacredentialspecs) are covered by customresources/read, narrowed by the condition below.
var readCustomResources = 'Microsoft.ContainerService/managedClusters/customresources/read'
var createLocalSubjectAccessReviews = 'Microsoft.ContainerService/managedClusters/authorization.k8s.io/localsubjectaccessreviews/write'
var createSubjectAccessReviews = 'Microsoft.ContainerService/managedClusters/authorization.k8s.io/subjectaccessreviews/write'
var webhookDataActions = concat(
  [
    readCustomResources
    createLocalSubjectAccessReviews
  ],
  includeSubjectAccessReviews ? [createSubjectAccessReviews] : []
)

// Any action other than a custom-resource read passes; a custom-resource read must be of
// windows.k8s.io/gmsacredentialspecs.
var gmsaCredentialSpecsOnly = '((!(ActionMatches{\'${readCustomResources}\'})) OR (@Request[Microsoft.ContainerService/managedClusters/customResources:group] StringEqualsIgnoreCase \'windows.k8s.io\' AND @Request[Microsoft.ContainerService/managedClusters/customResources:kind] StringEqualsIgnoreCase \'gmsacredentialspecs\'))'

resource cluster 'Microsoft.ContainerService/managedClusters@2024-09-01' existing = {
  name: clusterName
}

// Lets the identity read the user kubeconfig (listClusterUserCredential).
resource clusterUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(cluster.id, principalId, clusterUserRoleId)
  scope: cluster
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', clusterUserRoleId)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource webhookRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = if (clusterUsesAzureRbac) {
  name: guid(cluster.id, roleNameSuffix, 'gmsa-admission-webhook')
  properties: {
    roleName: 'GMSA admission webhook (${clusterName}, ${roleNameSuffix})'
    description: 'Read GMSA credential specs and create access reviews, as the gmsa-admission webhooks do.'
    type: 'CustomRole'
    permissions: [
      {
        actions: []
        notActions: []
        dataActions: webhookDataActions
        notDataActions: []
      }
    ]
    assignableScopes: [
      customRoleScope
    ]
  }
}

resource webhookRoleAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (clusterUsesAzureRbac) {
  name: guid(cluster.id, principalId, 'gmsa-admission-webhook', roleNameSuffix)
  scope: cluster
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', webhookRole.name)
    principalId: principalId
    principalType: 'ServicePrincipal'
    condition: restrictCustomResourceReads ? gmsaCredentialSpecsOnly : null
    conditionVersion: restrictCustomResourceReads ? '2.0' : null
  }
}

output clusterId string = cluster.id
output webhookDataActions array = clusterUsesAzureRbac ? webhookDataActions : []
