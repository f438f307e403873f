// gmsa-admission in one resource group: the two admission webhooks on a Flex Consumption
// function app, the identity that reaches storage, Application Insights and the AKS cluster,
// the network for the chosen wiring, and the monitoring a cluster operator reads in the portal.
targetScope = 'resourceGroup'

@description('A cluster of the fleet this Function App serves.')
type fleetMember = {
  @minLength(1)
  @maxLength(63)
  @description('Its name, a DNS label (a-z, 0-9 and -, starting and ending with a letter or digit): its paths /clusters/<name>/..., its setting GMSA_CLUSTER_SECRET_<NAME>, its secret in clusterSecrets, and the cluster dimension of the workbook and the alerts.')
  name: string

  @description('Resource ID of its AKS cluster: the identity gets its access there, and the app reaches its API server through it.')
  aksResourceId: string

  @description('Also wire it from this deployment with the Bicep Kubernetes extension (its admin kubeconfig: local accounts enabled, not a private cluster). Absent: wire it with npm run wire -- --cluster <name> (the workflow does, for every member without it).')
  wire: fleetMemberWiring?
}

@description('How this deployment wires one member (cluster-wiring.bicep); the mode is the deployment\'s (WIRE_MODE).')
type fleetMemberWiring = {
  @description('Install the GMSACredentialSpec CRD (default true); false when the cluster has it already (the AKS gMSA add-on).')
  installCrd: bool?

  @description('Install the in-cluster safety net (default true; docs/security.md).')
  safetyNet: bool?

  @description('Install the audit\'s read-only role (default false; docs/security.md).')
  audit: bool?

  @description('relay mode: PEM of the CA of the member\'s relay certificate (npm run wire -- --cluster <name> --certificate-out DIR writes ca.crt); its key goes in clusterRelayTlsKeys.')
  relayCaCertificate: string?

  @description('relay mode: PEM of the member\'s relay serving certificate (tls.crt).')
  relayTlsCertificate: string?

  @description('relay mode, while rotating the member\'s relay certificate: PEM of the CA deployed until now (docs/wiring.md).')
  relayPreviousCaCertificate: string?

  @description('relay mode: the konnectivity agents may reach the relay (default true).')
  relayAllowKonnectivity: bool?

  @description('relay mode: subnets that may reach the relay as well.')
  relayAllowFromCidrs: string[]?
}

@minLength(1)
@maxLength(64)
@description('Name of the environment (azd), used to derive unique resource names.')
param environmentName string

@description('Region for every resource. Defaults to the resource group\'s region.')
param location string = resourceGroup().location

@allowed([
  'public'
  'private'
])
@description('public: the function is reached over the internet through the in-cluster relay, with function keys and an IP allow-list. private: a private endpoint in a VNet the cluster can reach; no public inbound access; called by the API server itself or through the relay (privateWireMode).')
param networkMode string = 'public'

@description('Resource ID of the existing AKS cluster the webhooks serve. Empty: no cluster role assignments (the app settings still need it at run time).')
param clusterResourceId string = ''

@maxLength(64)
@description('A fleet: the clusters one Function App serves, each with its own paths, secret, API access and monitoring. Adding a cluster is adding an entry here (and its secret to clusterSecrets). Empty: the single cluster of clusterResourceId, exactly as before; with members, leave clusterResourceId empty (the app refuses both at once).')
param clusters fleetMember[] = []

@secure()
@description('A fleet: member name -> its secret (32 to 128 of A-Z a-z 0-9 _ -, at least 10 different; "new,old" while rotating), stored in Key Vault and handed to the app as a Key Vault reference. Every member needs one.')
param clusterSecrets object = {}

@secure()
@description('The same as clusterSecrets as base64 of its JSON, for azd (GMSA_CLUSTER_SECRETS_B64): its parameter substitution cannot carry a value with braces. Both given: merged, this one winning.')
param clusterSecretsBase64 string = ''

@secure()
@description('A fleet, members wired from this deployment in relay mode: member name -> PEM of the key of its relay certificate (tls.key).')
param clusterRelayTlsKeys object = {}

@description('True when the cluster uses Azure RBAC for Kubernetes authorization: the identity then gets a custom role with the data actions the webhooks need. False: the wiring step binds Kubernetes RBAC to the identity instead.')
param clusterUsesAzureRbac bool = false

@description('With Azure RBAC for Kubernetes: narrow the custom-resource read to windows.k8s.io/gmsacredentialspecs with an ABAC condition on the role assignment.')
param restrictCustomResourceReads bool = true

@description('public mode: the cluster\'s egress addresses (IPv4 or CIDR). When the list is not empty, every other source is denied.')
param clusterEgressIpAddresses array = []

@description('private mode: resource ID of the cluster\'s VNet, linked to the private DNS zone (and peered) so the cluster resolves and reaches the private endpoint. Empty: no link.')
param clusterVnetResourceId string = ''

@description('private mode: peer the function VNet with the cluster VNet (both directions).')
param peerWithClusterVnet bool = true

@description('private mode: address space of the function VNet; must not overlap the cluster VNet.')
param vnetAddressPrefix string = '10.250.0.0/23'

@description('private mode: subnet delegated to Microsoft.App/environments for outbound VNet integration.')
param functionSubnetPrefix string = '10.250.0.0/24'

@description('private mode: subnet that holds the private endpoint of the site.')
param privateEndpointSubnetPrefix string = '10.250.1.0/27'

@description('private mode: subnet that holds the storage account\'s private endpoints (blob, table).')
param storageEndpointSubnetPrefix string = '10.250.1.32/27'

@allowed([
  'url'
  'relay'
])
@description('private mode: how the API server reaches the private endpoint. url: directly, with API Server VNet Integration; the webhooks are served without function keys (the API server cannot send one) and only apiServerSubnetAddressPrefixes are admitted. relay: through the in-cluster relay, which sends a function key; relaySourceAddressPrefixes are admitted. Public mode always uses the relay.')
param privateWireMode string = 'url'

@description('private mode, url wiring: the API server subnet (API Server VNet Integration), and nothing else: node and pod subnets carry every pod\'s traffic, and the webhooks answer there without a function key. Only these, and deployRunnerAddressPrefixes, reach the private endpoint. Empty: nothing reaches it.')
param apiServerSubnetAddressPrefixes array = []

@description('private mode, relay wiring: the subnets the relay\'s pods send from (the node subnets, and the pod subnet with Azure CNI pod subnets). Any pod there reaches the endpoint, so the webhooks then require the function key the relay holds. Only these, and deployRunnerAddressPrefixes, reach the private endpoint. Empty: nothing reaches it.')
param relaySourceAddressPrefixes array = []

@description('private mode: address prefixes of the runner that deploys (the scm site shares the private endpoint) and checks /health.')
param deployRunnerAddressPrefixes array = []

@description('private mode: the resource ID of an existing privatelink.azurewebsites.net zone that already resolves for the cluster\'s VNet (a hub-and-spoke network\'s central zone). Given: the function\'s private endpoint registers there and no zone of this deployment is linked to the cluster VNet. Empty: the deployment makes its own zone and links it (docs/deploying.md).')
param existingSitesDnsZoneId string = ''

@minValue(0)
@description('Always-ready instances for the http trigger group (cold starts cost admission latency).')
param alwaysReadyHttpInstances int = 1

@allowed([
  512
  2048
  4096
])
@description('Memory of one instance, in MB.')
param instanceMemoryMB int = 2048

@minValue(40)
@maxValue(1000)
@description('Upper bound on instances the plan scales out to (40 is the lowest the Flex Consumption plan documents).')
param maximumInstanceCount int = 40

@minValue(1)
@maxValue(1000)
@description('HTTP invocations one instance serves at once (Flex perInstanceConcurrency; the documented default is 16 at 2048 MB, 4 at 512 MB, 32 at 4096 MB). The app gets it too (GMSA_INSTANCE_CONCURRENCY): one cluster whose API server hangs holds at most three quarters of it.')
param httpPerInstanceConcurrency int = 16

@description('Also require the requesting user to hold `use` on the credential spec (GMSA_AUTHORIZE_REQUESTING_USER).')
param authorizeRequestingUser bool = false

@description('Give GMSA pods without spec.hostname a random hostname (GMSA_RANDOM_HOSTNAME).')
param randomHostname bool = false

@description('The canary timer also audits each cluster\'s credential spec health and logs what it finds (GMSA_AUDIT). The function\'s identity needs the audit\'s read-only role: wireAudit, or npm run wire -- --audit.')
param auditCredSpecs bool = false

@minValue(100)
@description('Upper bound of one API-server call, in milliseconds (GMSA_API_TIMEOUT_MS).')
param apiTimeoutMs int = 2000

@minValue(0)
@description('Lifetime of cached authorization answers, in seconds (GMSA_AUTH_CACHE_TTL_SECONDS).')
param authCacheTtlSeconds int = 5

@minValue(1)
@maxValue(1000)
@description('The most distinct credential spec names one pod may carry; more is refused (GMSA_MAX_CREDSPECS_PER_POD).')
param maxCredSpecsPerPod int = 16

@minValue(1)
@maxValue(1000)
@description('The most places (pod, containers, annotations) one pod may set GMSA settings in; more is refused (GMSA_MAX_PLACES_PER_POD).')
param maxPlacesPerPod int = 64

@minValue(1)
@maxValue(256)
@description('The most calls one instance has in flight towards the API server; the rest wait within their budget (GMSA_API_CONCURRENCY).')
param apiConcurrency int = 16

@minValue(0)
@maxValue(1024)
@description('The most admissions of one namespace that may wait for a cluster\'s API server beyond its calls in flight; more are refused at once, so a hung API server holds few of the app\'s requests (GMSA_API_MAX_WAITING).')
param apiMaxWaiting int = apiConcurrency

@minValue(100)
@maxValue(29000)
@description('The longest one admission may take, in milliseconds (GMSA_ADMISSION_BUDGET_MS): below the webhook timeoutSeconds, and at least apiTimeoutMs. Past it an admission is refused (504).')
param admissionBudgetMs int = 4000

@minValue(1)
@maxValue(95)
@description('The p95 latency alert fires above this share of admissionBudgetMs, in percent: while admissions still finish, before they run out of budget and fail.')
param latencyAlertPercent int = 75

@description('Email address that receives the alerts. Empty: the alerts only show in the portal.')
param alertEmail string = ''

@description('Existing action groups (resource IDs) that severity 0 and 1 alerts notify (pods refused, or their path broken), beside alertEmail.')
param criticalActionGroupIds array = []

@description('Existing action groups (resource IDs) that severity 2 alerts notify (degraded, pods still admitted), beside alertEmail.')
param warningActionGroupIds array = []

@description('Where docs/runbook.md is published (say, its URL in your copy of the repository): every alert links its section.')
param runbookUrl string = ''

@description('Opt-in: send each cluster\'s kube-apiserver log to the app\'s Log Analytics workspace (table AKSControlPlane; ingestion is billed) and alert when the API server could not call the webhooks, which the function cannot see. Creates a diagnostic setting on each cluster: the deployment needs Microsoft.Insights/diagnosticSettings/write on it.')
param apiServerLogs bool = false

@description('Days the Log Analytics workspace keeps data.')
param logRetentionDays int = 30

@description('Tags added to every resource.')
param tags object = {}

@description('Also wire the cluster from this deployment (CRD, RBAC, webhook configurations and, in relay mode, the relay) with the Bicep Kubernetes extension. It reads the cluster\'s admin kubeconfig: the cluster must have local accounts enabled and must not be a private cluster. Default false: wire with `npm run wire` (docs/wiring.md), which works without local accounts.')
param wireCluster bool = false

@description('Cluster wiring: install the GMSACredentialSpec CRD. False when the cluster already has it (the AKS gMSA add-on installs it).')
param wireInstallCrd bool = true

@description('Cluster wiring: install the in-cluster safety net, ValidatingAdmissionPolicies with which the API server itself holds the use rule, the freeze of GMSA settings and the shape of credential specs where the webhooks do not run (docs/security.md). Default true.')
param wireSafetyNet bool = true

@description('Cluster wiring: let the function\'s identity list pods and RBAC objects, read-only, for the credential spec audit the app runs with auditCredSpecs (docs/security.md). Default: auditCredSpecs.')
param wireAudit bool = auditCredSpecs

@secure()
@description('Cluster wiring, relay mode: the function key the relay sends (az functionapp keys list).')
param relayFunctionKey string = ''

@description('Cluster wiring, relay mode: PEM of the relay certificate\'s CA (npm run wire -- --mode relay ... --certificate-out DIR writes ca.crt).')
param relayCaCertificate string = ''

@description('Cluster wiring, relay mode: PEM of the relay\'s serving certificate (tls.crt from the same command).')
param relayTlsCertificate string = ''

@secure()
@description('Cluster wiring, relay mode: PEM of the relay certificate\'s key (tls.key from the same command).')
param relayTlsKey string = ''

@description('Cluster wiring, relay mode, while rotating the relay certificate: PEM of the CA deployed until now. The webhooks trust it too until you deploy again with this empty, once the relay\'s rollout is done (docs/wiring.md).')
param relayPreviousCaCertificate string = ''

@description('Cluster wiring, relay mode: the konnectivity agents may reach the relay (how a standard AKS API server calls into the cluster).')
param relayAllowKonnectivity bool = true

@description('Cluster wiring, relay mode: subnets that may reach the relay as well, e.g. the API server subnet with API Server VNet Integration (\'10.224.0.0/28\').')
param relayAllowFromCidrs array = []

var resourceToken = toLower(uniqueString(subscription().id, resourceGroup().id, environmentName))
var allTags = union(tags, { 'azd-env-name': environmentName })
var privateMode = networkMode == 'private'
var hasCluster = !empty(clusterResourceId)
var clusterIdSegments = split(clusterResourceId, '/')
var clusterSubscriptionId = hasCluster ? clusterIdSegments[2] : subscription().subscriptionId
var clusterResourceGroupName = hasCluster ? clusterIdSegments[4] : resourceGroup().name
// Private mode puts the function where a VNet-integrated API server reaches it, or behind the
// relay; public mode needs the relay.
var wireMode = privateMode ? privateWireMode : 'relay'
// Who may reach the private endpoint follows the wiring: the API server subnet alone when the
// webhooks are keyless (url), the relay's subnets when they require the key (relay).
var privateEndpointCallers = wireMode == 'url' ? apiServerSubnetAddressPrefixes : relaySourceAddressPrefixes
var wiring = wireCluster && hasCluster
var fleet = !empty(clusters)
var memberSecrets = union(clusterSecrets, empty(clusterSecretsBase64) ? {} : json(base64ToString(clusterSecretsBase64)))

module identity 'br/public:avm/res/managed-identity/user-assigned-identity:0.4.1' = {
  name: 'identity'
  params: {
    name: 'id-gmsa-${resourceToken}'
    location: location
    tags: allTags
    enableTelemetry: false
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    logRetentionDays: logRetentionDays
    principalId: identity.outputs.principalId
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    principalId: identity.outputs.principalId
    privateMode: privateMode
  }
}

module network 'modules/network.bicep' = if (privateMode) {
  name: 'network'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    vnetAddressPrefix: vnetAddressPrefix
    functionSubnetPrefix: functionSubnetPrefix
    privateEndpointSubnetPrefix: privateEndpointSubnetPrefix
    storageEndpointSubnetPrefix: storageEndpointSubnetPrefix
    privateEndpointAllowedSources: concat(privateEndpointCallers, deployRunnerAddressPrefixes)
    clusterVnetResourceId: clusterVnetResourceId
    peerWithClusterVnet: peerWithClusterVnet
    existingSitesDnsZoneId: existingSitesDnsZoneId
    keyVaultEndpoint: fleet
  }
}

module storageEndpoints 'modules/storage-endpoints.bicep' = if (privateMode) {
  name: 'storage-endpoints'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    storageAccountName: storage.outputs.name
    subnetId: network.?outputs.storageEndpointSubnetId ?? ''
    blobDnsZoneId: network.?outputs.blobDnsZoneId ?? ''
    tableDnsZoneId: network.?outputs.tableDnsZoneId ?? ''
  }
}

// A fleet's member secrets, read by the identity alone (Key Vault Secrets User).
module clusterSecretVault 'modules/cluster-secrets.bicep' = if (fleet) {
  name: 'cluster-secrets'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    principalId: identity.outputs.principalId
    clusterNames: [for member in clusters: member.name]
    clusterSecrets: memberSecrets
    privateMode: privateMode
    endpointSubnetId: network.?outputs.storageEndpointSubnetId ?? ''
    dnsZoneId: network.?outputs.keyVaultDnsZoneId ?? ''
  }
}

module functionApp 'modules/function-app.bicep' = {
  name: 'function-app'
  params: {
    location: location
    tags: allTags
    resourceToken: resourceToken
    networkMode: networkMode
    wireMode: wireMode
    identityResourceId: identity.outputs.resourceId
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    appInsightsConnectionString: monitoring.outputs.appInsightsConnectionString
    alwaysReadyHttpInstances: alwaysReadyHttpInstances
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    httpPerInstanceConcurrency: httpPerInstanceConcurrency
    clusterEgressIpAddresses: clusterEgressIpAddresses
    functionSubnetId: network.?outputs.functionSubnetId ?? ''
    privateEndpointSubnetId: network.?outputs.privateEndpointSubnetId ?? ''
    privateDnsZoneId: network.?outputs.privateDnsZoneId ?? ''
    clusterResourceId: clusterResourceId
    clusters: [for member in clusters: {
      name: member.name
      aksResourceId: member.aksResourceId
    }]
    clusterVaultReferenceUris: clusterSecretVault.?outputs.referenceUris ?? []
    authorizeRequestingUser: authorizeRequestingUser
    randomHostname: randomHostname
    auditCredSpecs: auditCredSpecs
    apiTimeoutMs: apiTimeoutMs
    authCacheTtlSeconds: authCacheTtlSeconds
    admissionBudgetMs: admissionBudgetMs
    maxCredSpecsPerPod: maxCredSpecsPerPod
    maxPlacesPerPod: maxPlacesPerPod
    apiConcurrency: apiConcurrency
    apiMaxWaiting: apiMaxWaiting
  }
  // In private mode the app starts only once its storage is reachable from its subnet; its
  // member secrets are readable before it resolves them.
  dependsOn: [
    storageEndpoints
    clusterSecretVault
  ]
}

// The cluster may live in another resource group (or subscription): the module runs there.
module clusterAccess 'modules/cluster-access.bicep' = if (hasCluster) {
  name: 'cluster-access-${resourceToken}'
  scope: resourceGroup(clusterSubscriptionId, clusterResourceGroupName)
  params: {
    clusterName: hasCluster ? last(clusterIdSegments) : ''
    principalId: identity.outputs.principalId
    clusterUsesAzureRbac: clusterUsesAzureRbac
    includeSubjectAccessReviews: authorizeRequestingUser
    restrictCustomResourceReads: restrictCustomResourceReads
    roleNameSuffix: environmentName
  }
}

resource cluster 'Microsoft.ContainerService/managedClusters@2024-09-01' existing = {
  name: hasCluster ? last(clusterIdSegments) : 'no-cluster'
  scope: resourceGroup(clusterSubscriptionId, clusterResourceGroupName)
}

// A relay wiring without its function key or TLS key would install a relay that refuses every
// GMSA pod: the deployment is refused instead, before anything reaches the cluster.
module relayInputs 'modules/relay-wiring-inputs.bicep' = if (wiring && wireMode == 'relay') {
  name: 'relay-inputs-${resourceToken}'
  params: {
    wiredCluster: 'the cluster'
    relayFunctionKey: relayFunctionKey
    relayCaCertificate: relayCaCertificate
    relayTlsCertificate: relayTlsCertificate
    relayTlsKey: relayTlsKey
  }
}

// The same objects `npm run wire` renders (the module is generated from that renderer).
module clusterWiring 'modules/cluster-wiring.bicep' = if (wiring) {
  name: 'cluster-wiring-${resourceToken}'
  params: {
    kubeConfig: wiring ? cluster.listClusterAdminCredential().kubeconfigs[0].value : ''
    mode: wireMode
    functionHost: functionApp.outputs.defaultHostName
    identityObjectId: identity.outputs.principalId
    installCrd: wireInstallCrd
    safetyNet: wireSafetyNet
    audit: wireAudit
    authorizeRequestingUser: authorizeRequestingUser
    functionKey: relayFunctionKey
    relayCaCertificate: relayCaCertificate
    relayTlsCertificate: relayTlsCertificate
    relayTlsKey: relayTlsKey
    relayPreviousCaCertificate: relayPreviousCaCertificate
    relayAllowKonnectivity: relayAllowKonnectivity
    relayAllowFromCidrs: relayAllowFromCidrs
  }
  dependsOn: [
    relayInputs
  ]
}

// Each member's access on its own AKS cluster, in that cluster's resource group (or subscription).
module memberAccess 'modules/cluster-access.bicep' = [
  for member in clusters: {
    name: 'access-${take(member.name, 40)}-${uniqueString(resourceToken, member.name)}'
    scope: resourceGroup(split(member.aksResourceId, '/')[2], split(member.aksResourceId, '/')[4])
    params: {
      clusterName: last(split(member.aksResourceId, '/'))
      principalId: identity.outputs.principalId
      clusterUsesAzureRbac: clusterUsesAzureRbac
      includeSubjectAccessReviews: authorizeRequestingUser
      restrictCustomResourceReads: restrictCustomResourceReads
      // Custom role names are unique in the tenant: two members' clusters may share a name.
      roleNameSuffix: '${environmentName}-${member.name}'
    }
  }
]

resource memberClusters 'Microsoft.ContainerService/managedClusters@2024-09-01' existing = [
  for member in clusters: {
    name: last(split(member.aksResourceId, '/'))
    scope: resourceGroup(split(member.aksResourceId, '/')[2], split(member.aksResourceId, '/')[4])
  }
]

// Each member wired here in relay mode must come with its relay's key and certificate.
module memberRelayInputs 'modules/relay-wiring-inputs.bicep' = [
  for (member, index) in clusters: if (member.?wire != null && wireMode == 'relay') {
    // Deployment names are at most 64 characters: 13 + 37 + 1 + 13.
    name: 'relay-inputs-${take(member.name, 37)}-${uniqueString(resourceToken, member.name)}'
    params: {
      wiredCluster: member.name
      relayFunctionKey: relayFunctionKey
      relayCaCertificate: member.?wire.?relayCaCertificate ?? ''
      relayTlsCertificate: member.?wire.?relayTlsCertificate ?? ''
      relayTlsKey: contains(clusterRelayTlsKeys, member.name) ? clusterRelayTlsKeys[member.name] : ''
    }
  }
]

// Members with `wire`: the same objects `npm run wire -- --cluster <name>` renders, on the
// member's paths and with its secret.
module memberWiring 'modules/cluster-wiring.bicep' = [
  for (member, index) in clusters: if (member.?wire != null) {
    name: 'wiring-${take(member.name, 40)}-${uniqueString(resourceToken, member.name)}'
    params: {
      kubeConfig: member.?wire != null ? memberClusters[index].listClusterAdminCredential().kubeconfigs[0].value : ''
      mode: wireMode
      functionHost: functionApp.outputs.defaultHostName
      identityObjectId: identity.outputs.principalId
      installCrd: member.?wire.?installCrd ?? true
      safetyNet: member.?wire.?safetyNet ?? true
      audit: member.?wire.?audit ?? false
      authorizeRequestingUser: authorizeRequestingUser
      functionKey: relayFunctionKey
      clusterName: member.name
      clusterSecret: first(split(memberSecrets[member.name], ','))
      relayCaCertificate: member.?wire.?relayCaCertificate ?? ''
      relayTlsCertificate: member.?wire.?relayTlsCertificate ?? ''
      relayTlsKey: contains(clusterRelayTlsKeys, member.name) ? clusterRelayTlsKeys[member.name] : ''
      relayPreviousCaCertificate: member.?wire.?relayPreviousCaCertificate ?? ''
      relayAllowKonnectivity: member.?wire.?relayAllowKonnectivity ?? true
      relayAllowFromCidrs: member.?wire.?relayAllowFromCidrs ?? []
    }
    // The member's access exists before its webhooks call the app; its relay inputs were given.
    dependsOn: [
      memberAccess
      memberRelayInputs
    ]
  }
]

// The API server's own view, opt-in: each cluster's kube-apiserver log into the app's workspace.
module clusterApiServerLogs 'modules/api-server-logs.bicep' = if (apiServerLogs && hasCluster && empty(clusters)) {
  name: 'api-server-logs-${resourceToken}'
  scope: resourceGroup(clusterSubscriptionId, clusterResourceGroupName)
  params: {
    clusterName: last(clusterIdSegments)
    workspaceId: monitoring.outputs.workspaceId
  }
}

module memberApiServerLogs 'modules/api-server-logs.bicep' = [
  for member in clusters: if (apiServerLogs) {
    name: 'api-server-logs-${take(member.name, 40)}-${uniqueString(resourceToken, member.name)}'
    scope: resourceGroup(split(member.aksResourceId, '/')[2], split(member.aksResourceId, '/')[4])
    params: {
      clusterName: last(split(member.aksResourceId, '/'))
      workspaceId: monitoring.outputs.workspaceId
    }
  }
]

// The clusters the canary reports on, by the name its lines carry.
var memberNames = map(clusters, entry => string(entry.name))
var canaryClusters = empty(clusters) ? ['default'] : memberNames

module admissionMonitoring 'modules/admission-monitoring.bicep' = {
  name: 'admission-monitoring'
  params: {
    location: location
    tags: allTags
    environmentName: environmentName
    appInsightsId: monitoring.outputs.appInsightsId
    // A share of the budget the app is given: above it, admissions are close to failing with 504.
    latencyAlertThresholdMs: admissionBudgetMs * latencyAlertPercent / 100
    alertEmail: alertEmail
    criticalActionGroupIds: criticalActionGroupIds
    warningActionGroupIds: warningActionGroupIds
    canaryClusters: canaryClusters
    runbookUrl: runbookUrl
    workspaceId: monitoring.outputs.workspaceId
    apiServerLogs: apiServerLogs
    auditEnabled: auditCredSpecs
  }
}

output ALERT_ROUTING_WARNING string = admissionMonitoring.outputs.alertRoutingWarning
output AZURE_RESOURCE_GROUP string = resourceGroup().name
output AZURE_LOCATION string = location
output FUNCTION_APP_NAME string = functionApp.outputs.name
output FUNCTION_HOST_NAME string = functionApp.outputs.defaultHostName
output WEBHOOK_BASE_URL string = 'https://${functionApp.outputs.defaultHostName}'
output IDENTITY_CLIENT_ID string = identity.outputs.clientId
output IDENTITY_PRINCIPAL_ID string = identity.outputs.principalId
output NETWORK_MODE string = networkMode
output WIRE_MODE string = wireMode
output FUNCTION_EGRESS_IP string = network.?outputs.egressIpAddress ?? ''
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.appInsightsName
output WORKBOOK_ID string = admissionMonitoring.outputs.workbookId
output FLEET_CLUSTERS array = [for member in clusters: member.name]
output FLEET_VAULT_NAME string = clusterSecretVault.?outputs.name ?? ''
