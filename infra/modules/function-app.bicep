// The webhooks' host: a Linux function app on the Flex Consumption plan, running as the
// user-assigned identity, with identity-based storage and telemetry, no basic-auth publishing,
// and inbound access that depends on the network mode.
param location string
param tags object
param resourceToken string

@allowed([
  'public'
  'private'
])
param networkMode string

@allowed([
  'url'
  'relay'
])
@description('How the API server\'s calls arrive: url, from the API server subnet itself (private mode only); relay, from the in-cluster relay, which sends a function key.')
param wireMode string

param identityResourceId string
param identityClientId string
param storageAccountName string

@description('URL of the blob container that holds the deployment package.')
param deploymentContainerUrl string

param appInsightsConnectionString string

@minValue(0)
param alwaysReadyHttpInstances int = 1

@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

// 40 is the lowest maximum the Flex Consumption plan has documented; any value from 40 up is
// accepted whichever floor a region applies.
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

// Set explicitly, not left to the platform's default for the instance size: the app bounds what
// one cluster may hold of it (GMSA_INSTANCE_CONCURRENCY), so both must be the same number.
@minValue(1)
@maxValue(1000)
@description('HTTP invocations one instance serves at once (Flex perInstanceConcurrency; the documented default is 16 at 2048 MB, 4 at 512 MB, 32 at 4096 MB). The app gets it too (GMSA_INSTANCE_CONCURRENCY): one cluster whose API server hangs holds at most three quarters of it.')
param httpPerInstanceConcurrency int = 16

@description('public mode: addresses (IPv4 or CIDR) allowed in; empty allows every source (function keys still apply).')
param clusterEgressIpAddresses array = []

@description('private mode: subnet delegated to Microsoft.App/environments.')
param functionSubnetId string = ''

@description('private mode: subnet of the private endpoint.')
param privateEndpointSubnetId string = ''

@description('private mode: the privatelink.azurewebsites.net zone.')
param privateDnsZoneId string = ''

param clusterResourceId string

@description('A fleet: its members ({ name, aksResourceId }), in order. Empty: the single cluster of clusterResourceId.')
param clusters array = []

@description('A fleet: the Key Vault URI (with its version) of each member\'s secret, in the order of clusters.')
param clusterVaultReferenceUris array = []
param authorizeRequestingUser bool = false
param randomHostname bool = false
@description('The canary timer also audits each cluster\'s credential spec health (GMSA_AUDIT).')
param auditCredSpecs bool = false
param apiTimeoutMs int = 2000
param authCacheTtlSeconds int = 5

@description('The longest one admission may take, in milliseconds; below the webhook timeoutSeconds.')
param admissionBudgetMs int = 4000

@minValue(1)
@maxValue(1000)
@description('The most distinct credential spec names one pod may carry (GMSA_MAX_CREDSPECS_PER_POD).')
param maxCredSpecsPerPod int = 16

@minValue(1)
@maxValue(1000)
@description('The most places (pod, containers, annotations) one pod may set GMSA settings in (GMSA_MAX_PLACES_PER_POD).')
param maxPlacesPerPod int = 64

@minValue(1)
@maxValue(256)
@description('The most calls one instance has in flight towards the API server (GMSA_API_CONCURRENCY).')
param apiConcurrency int = 16

@minValue(0)
@maxValue(1024)
@description('The most admissions of one namespace that may wait for the API server beyond its calls in flight; more are refused at once (GMSA_API_MAX_WAITING).')
param apiMaxWaiting int = apiConcurrency

var privateMode = networkMode == 'private'
// The one deployment served without function keys: private, called by the API server itself,
// whose subnet alone the private endpoint admits (it cannot send a key). A relay's traffic
// leaves from subnets every pod shares, so only the key tells the relay from a forger.
var anonymousWebhooks = privateMode && wireMode == 'url'
var restrictInbound = !privateMode && !empty(clusterEgressIpAddresses)
var appName = 'func-gmsa-${resourceToken}'
var fleet = !empty(clusters)

// One cluster: today's settings. A fleet: GMSA_CLUSTERS names every member and its AKS cluster,
// and each member's secret is a Key Vault reference the host resolves with the app's identity.
// The single-cluster access settings stay out (the app refuses both at once as ambiguous),
// unless clusterResourceId is set as well, which the app then refuses at start-up, loudly.
var singleClusterSettings = fleet && empty(clusterResourceId) ? {} : {
  GMSA_CLUSTER_ACCESS: 'entra'
  GMSA_AKS_RESOURCE_ID: clusterResourceId
}
var fleetSettings = fleet ? union({
  GMSA_CLUSTERS: string(toObject(clusters, member => string(member.name), member => {
    aksResourceId: member.aksResourceId
  }))
}, toObject(range(0, length(clusters)), index => 'GMSA_CLUSTER_SECRET_${toUpper(replace(clusters[index].name, '-', '_'))}', index => '@Microsoft.KeyVault(SecretUri=${clusterVaultReferenceUris[index]})')) : {}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: 'plan-gmsa-${resourceToken}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: union(tags, { 'azd-service-name': 'webhooks' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityResourceId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // The member secrets' Key Vault references resolve with the app's one identity.
    keyVaultReferenceIdentity: fleet ? identityResourceId : null
    publicNetworkAccess: privateMode ? 'Disabled' : 'Enabled'
    virtualNetworkSubnetId: privateMode ? functionSubnetId : null
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityResourceId
          }
        }
      }
      scaleAndConcurrency: {
        alwaysReady: alwaysReadyHttpInstances > 0
          ? [
              {
                name: 'http'
                instanceCount: alwaysReadyHttpInstances
              }
            ]
          : []
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
        triggers: {
          http: {
            perInstanceConcurrency: httpPerInstanceConcurrency
          }
        }
      }
      runtime: {
        name: 'node'
        version: '22'
      }
    }
    // Flex Consumption refuses a site whose siteConfig carries the properties its deprecations
    // table lists (ftpsState among them: Azure/azure-cli issue 31414); test/infra/flexDeprecations.ts
    // holds that table. FTP is off through basicPublishingCredentialsPolicies below, and a
    // VNet-integrated Flex app routes all its outbound traffic into the VNet (private endpoints,
    // such as the fleet's Key Vault, included) without vnetRouteAllEnabled.
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ipSecurityRestrictions: [
        for (address, index) in (restrictInbound ? clusterEgressIpAddresses : []): {
          name: 'cluster-egress-${index}'
          description: 'Egress of the AKS cluster (relay)'
          ipAddress: contains(address, '/') ? address : '${address}/32'
          action: 'Allow'
          priority: 100 + index
        }
      ]
      ipSecurityRestrictionsDefaultAction: restrictInbound ? 'Deny' : 'Allow'
      // The scm site (deployments, with Entra tokens: basic auth is off below) is reachable from
      // exactly where the app is: the same rules, the same public access, the same endpoint. The
      // workflow admits its runner before it deploys.
      scmIpSecurityRestrictionsUseMain: true
      scmIpSecurityRestrictionsDefaultAction: restrictInbound ? 'Deny' : 'Allow'
    }
  }
}

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  // Values are strings; booleans are spelled in lower case, as the code compares them.
  properties: union({
    AzureWebJobsStorage__accountName: storageAccountName
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    AZURE_CLIENT_ID: identityClientId
    GMSA_AUTHORIZE_REQUESTING_USER: authorizeRequestingUser ? 'true' : 'false'
    GMSA_RANDOM_HOSTNAME: randomHostname ? 'true' : 'false'
    GMSA_AUDIT: auditCredSpecs ? 'true' : 'false'
    GMSA_API_TIMEOUT_MS: string(apiTimeoutMs)
    GMSA_AUTH_CACHE_TTL_SECONDS: string(authCacheTtlSeconds)
    GMSA_ADMISSION_BUDGET_MS: string(admissionBudgetMs)
    GMSA_MAX_CREDSPECS_PER_POD: string(maxCredSpecsPerPod)
    GMSA_MAX_PLACES_PER_POD: string(maxPlacesPerPod)
    GMSA_API_CONCURRENCY: string(apiConcurrency)
    GMSA_INSTANCE_CONCURRENCY: string(httpPerInstanceConcurrency)
    GMSA_API_MAX_WAITING: string(apiMaxWaiting)
    // The app refuses to start keyless unless these say private and url, so the key setting
    // below comes from the same two parameters.
    GMSA_NETWORK_MODE: networkMode
    GMSA_WIRING_MODE: wireMode
    // A bad value of the two above throws while the functions register: the worker must then
    // stop the app (the default from Node 20 on; said here so it cannot drift).
    FUNCTIONS_NODE_BLOCK_ON_ENTRY_POINT_ERROR: 'true'
    GMSA_REQUIRE_FUNCTION_KEY: anonymousWebhooks ? 'false' : 'true'
    // The C library's allocator, read by the worker process at its start: two arenas instead of
    // one per thread, and freed memory returned past 128 KiB rather than a threshold that grows.
    // Under load V8's compiler threads leave megabytes in arenas of their own that are never
    // given back; with these the local serving process held 84-89 MiB after load, not 93-97.
    MALLOC_ARENA_MAX: '2'
    MALLOC_TRIM_THRESHOLD_: '131072'
  }, singleClusterSettings, fleetSettings)
}

resource ftpPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPublishing 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

resource privateEndpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = if (privateMode) {
  name: 'pe-${appName}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: privateEndpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'sites'
        properties: {
          privateLinkServiceId: site.id
          groupIds: [
            'sites'
          ]
        }
      }
    ]
  }
}

resource privateEndpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = if (privateMode) {
  parent: privateEndpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'privatelink-azurewebsites-net'
        properties: {
          privateDnsZoneId: privateDnsZoneId
        }
      }
    ]
  }
}

output name string = site.name
output id string = site.id
output defaultHostName string = site.properties.defaultHostName
