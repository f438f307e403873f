// The portal view of admissions: a workbook and alert rules over the one structured line the
// webhooks write per admission, split by the cluster the line names (a fleet's member, or
// "default" for a single-cluster deployment): one dashboard for the whole fleet, one alert per
// cluster whose admissions go wrong. Field names come from the same file the code uses, so a
// renamed field breaks this build instead of silently emptying the charts.
param location string
param tags object
param environmentName string

@description('Application Insights component that receives the webhooks\' traces.')
param appInsightsId string

@description('The p95 latency alert fires above this many milliseconds: below the admission budget, so it fires while admissions still finish.')
param latencyAlertThresholdMs int

@description('Email address for the alerts; empty sends none.')
param alertEmail string = ''

@description('Admissions refused in 5 minutes because the Kubernetes API server failed, that raise an alert.')
param apiErrorThreshold int = 5

@description('Denials in the last 10 minutes below which no spike is reported.')
param denialSpikeMinimum int = 20

@description('A spike is this many times the denials of an average 10 minutes of the hour before.')
param denialSpikeFactor int = 5

@description('Admissions in the 5.5 hours before the last 30 minutes that make a cluster count as busy.')
param busyClusterMinimum int = 30

@minValue(1)
@maxValue(100)
@description('A cluster\'s error rate alert fires above this share of its admissions failing (refused with 5xx: API server, budget, internal), in percent.')
param errorRateAlertPercent int = 5

@description('Admissions of a cluster in the window below which its error rate is not judged.')
param errorRateMinimum int = 10

var admissionLog = loadJsonContent('../../lib/observability/admission-log.json')
var field = admissionLog.fields
var decisionDenied = 'denied'
var decisionError = 'error'

// One row per admission, with the JSON fields as typed columns. The webhook writes the JSON
// object as the whole trace message. The Functions host samples traces when they come fast
// (adaptive sampling is on by default): a kept row stands for itemCount admissions, so every
// count and sum below is weighted by ItemCount, never a count of rows.
var admissions = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| where tostring(entry["${field.event}"]) == "${admissionLog.event}"'
    // Server-side dry runs (the canary's every few minutes, kubectl --dry-run=server) store no pod.
    '| where tobool(entry["${field.dryRun}"]) != true'
    '| project timestamp'
    ', ItemCount = itemCount'
    ', Cluster = tostring(entry["${field.cluster}"])'
    ', Webhook = tostring(entry["${field.webhook}"])'
    ', Operation = tostring(entry["${field.operation}"])'
    ', Namespace = tostring(entry["${field.namespace}"])'
    ', Decision = tostring(entry["${field.decision}"])'
    ', Code = toint(entry["${field.code}"])'
    ', Reason = tostring(entry["${field.reason}"])'
    ', LatencyMs = todouble(entry["${field.latencyMs}"])'
    ', CacheHits = toint(entry["${field.cacheHits}"])'
    ', CacheMisses = toint(entry["${field.cacheMisses}"])'
    ', ApiCalls = toint(entry["${field.apiCalls}"])'
    ', ApiErrors = toint(entry["${field.apiErrors}"])'
    ', ColdStart = tobool(entry["${field.coldStart}"])'
  ],
  '\n'
)

var admissionsPerMinuteQuery = '${admissions}\n| summarize Admissions = sum(ItemCount) by Decision, bin(timestamp, 1m)'
var denialsQuery = '${admissions}\n| where Decision == "${decisionDenied}"\n| summarize Denials = sum(ItemCount) by Cluster, Reason, Namespace\n| order by Denials desc'
var latencyQuery = '${admissions}\n| summarize percentilesw(LatencyMs, ItemCount, 50, 95, 99) by bin(timestamp, 5m)\n| project timestamp, p50 = percentile_LatencyMs_50, p95 = percentile_LatencyMs_95, p99 = percentile_LatencyMs_99'
var apiServerQuery = '${admissions}\n| summarize Calls = sum(ApiCalls * ItemCount), Errors = sum(ApiErrors * ItemCount) by bin(timestamp, 1m)'
var cacheQuery = '${admissions}\n| summarize Hits = sum(CacheHits * ItemCount), Misses = sum(CacheMisses * ItemCount) by bin(timestamp, 5m)\n| extend HitRatio = iff(Hits + Misses == 0, real(null), todouble(Hits) / (Hits + Misses))\n| project timestamp, HitRatio'
// The fleet: one row per cluster, the worst first, and the charts split by cluster.
var fleetOverviewQuery = '${admissions}\n| summarize Admissions = sum(ItemCount), Denied = sumif(ItemCount, Decision == "${decisionDenied}"), Errors = sumif(ItemCount, Decision == "${decisionError}"), ApiErrors = sum(ApiErrors * ItemCount), P95 = percentilew(LatencyMs, ItemCount, 95), LastAdmission = max(timestamp) by Cluster\n| extend ErrorRatePercent = round(100.0 * Errors / Admissions, 2)\n| project Cluster, Admissions, Denied, Errors, ErrorRatePercent, P95, ApiErrors, LastAdmission\n| order by ErrorRatePercent desc, Admissions desc'
var admissionsByClusterQuery = '${admissions}\n| summarize Admissions = sum(ItemCount) by Cluster, bin(timestamp, 5m)'
var errorsByClusterQuery = '${admissions}\n| where Decision == "${decisionError}"\n| summarize Errors = sum(ItemCount) by Cluster, bin(timestamp, 5m)'
var latencyByClusterQuery = '${admissions}\n| summarize P95 = percentilew(LatencyMs, ItemCount, 95) by Cluster, bin(timestamp, 5m)'
var apiErrorsByClusterQuery = '${admissions}\n| summarize ApiErrors = sum(ApiErrors * ItemCount) by Cluster, bin(timestamp, 5m)'
var coldStartQuery = '${admissions}\n| summarize ColdStarts = sumif(ItemCount, ColdStart), Admissions = sum(ItemCount) by bin(timestamp, 15m)'

// Each alert query returns one row per cluster whose condition holds; the rules split by the
// Cluster column (a dimension), so each such cluster fires, and resolves, on its own.
// Only admissions that failed: a call that failed once and then succeeded on a retry leaves an
// API error on a line that was still decided. A cluster whose API server is down, slow or
// unreachable fails closed for itself alone, and this says which.
var apiErrorAlertQuery = '${admissions}\n| where Decision == "${decisionError}" and ApiErrors > 0\n| summarize Refused = sum(ItemCount) by Cluster\n| where Refused >= ${apiErrorThreshold}'
var latencyAlertQuery = '${admissions}\n| summarize P95 = percentilew(LatencyMs, ItemCount, 95), Admissions = sum(ItemCount) by Cluster\n| where Admissions >= 10 and P95 > ${latencyAlertThresholdMs}'
var errorRateAlertQuery = '${admissions}\n| summarize Errors = sumif(ItemCount, Decision == "${decisionError}"), Admissions = sum(ItemCount) by Cluster\n| where Admissions >= ${errorRateMinimum} and 100.0 * Errors / Admissions > ${errorRateAlertPercent}'
var denialSpikeAlertQuery = '${admissions}\n| where Decision == "${decisionDenied}"\n| summarize Recent = sumif(ItemCount, timestamp > ago(10m)), Earlier = sumif(ItemCount, timestamp <= ago(10m)) by Cluster\n| where Recent >= ${denialSpikeMinimum} and Recent > ${denialSpikeFactor} * (Earlier / 5.0)'
var noTrafficAlertQuery = '${admissions}\n| summarize Recent = sumif(ItemCount, timestamp > ago(30m)), Earlier = sumif(ItemCount, timestamp <= ago(30m)) by Cluster\n| where Recent == 0 and Earlier >= ${busyClusterMinimum}'

// The column of every alert query that names the cluster: one alert per cluster.
var clusterDimension = 'Cluster'

var componentsType = 'microsoft.insights/components'

var workbookContent = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      name: 'title'
      content: {
        json: '## GMSA admission (${environmentName})\nOne line per admission from the webhooks, of every cluster this app serves.'
      }
    }
    {
      type: 9
      name: 'parameters'
      content: {
        version: 'KqlParameterItem/1.0'
        parameters: [
          {
            id: guid(appInsightsId, 'time-range')
            version: 'KqlParameterItem/1.0'
            name: 'TimeRange'
            label: 'Time range'
            type: 4
            isRequired: true
            value: {
              durationMs: 14400000
            }
            typeSettings: {
              selectableValues: [
                { durationMs: 3600000 }
                { durationMs: 14400000 }
                { durationMs: 86400000 }
                { durationMs: 604800000 }
              ]
            }
          }
        ]
        style: 'pills'
        queryType: 0
        resourceType: componentsType
      }
    }
    {
      type: 3
      name: 'fleet-overview'
      content: {
        version: 'KqlItem/1.0'
        title: 'Fleet: each cluster, the worst first'
        query: fleetOverviewQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'admissions-by-cluster'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Admissions by cluster'
        query: admissionsByClusterQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'errors-by-cluster'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Failed admissions (5xx) by cluster'
        query: errorsByClusterQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'latency-by-cluster'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Latency p95 by cluster (ms)'
        query: latencyByClusterQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'linechart'
      }
    }
    {
      type: 3
      name: 'api-errors-by-cluster'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'API-server errors by cluster'
        query: apiErrorsByClusterQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'admissions-per-minute'
      content: {
        version: 'KqlItem/1.0'
        title: 'Admissions per minute by decision'
        query: admissionsPerMinuteQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'denials'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Denials by reason and namespace'
        query: denialsQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'latency'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Latency p50 / p95 / p99 (ms)'
        query: latencyQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'linechart'
      }
    }
    {
      type: 3
      name: 'api-server'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'API-server calls and errors per minute'
        query: apiServerQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'cache'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Cache hit ratio'
        query: cacheQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'linechart'
      }
    }
    {
      type: 3
      name: 'cold-starts'
      content: {
        version: 'KqlItem/1.0'
        title: 'Cold starts'
        query: coldStartQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'barchart'
      }
    }
  ]
  fallbackResourceIds: [
    appInsightsId
  ]
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, appInsightsId, 'gmsa-admission-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'GMSA admission (${environmentName})'
    category: 'workbook'
    sourceId: appInsightsId
    version: 'Notebook/1.0'
    serializedData: string(workbookContent)
  }
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: 'ag-gmsa-${uniqueString(appInsightsId)}'
  location: 'Global'
  tags: tags
  properties: {
    groupShortName: 'gmsa-adm'
    enabled: true
    emailReceivers: empty(alertEmail)
      ? []
      : [
          {
            name: 'operator'
            emailAddress: alertEmail
            useCommonAlertSchema: true
          }
        ]
  }
}

var alertRules = [
  {
    name: 'api-server-errors'
    displayName: 'GMSA admission: a cluster\'s API server failing or unreachable (${environmentName})'
    description: 'A cluster\'s admissions were refused because calls to its Kubernetes API server failed (errors, timeouts, unreachable); its GMSA pods fail closed while this lasts. The alert names the cluster (dimension Cluster).'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    query: apiErrorAlertQuery
  }
  {
    name: 'latency-near-timeout'
    displayName: 'GMSA admission: a cluster\'s p95 latency near the admission budget (${environmentName})'
    description: 'A cluster\'s p95 admission latency is above ${latencyAlertThresholdMs} ms, close to the admission budget: an admission that runs out of it refuses its GMSA pod (504).'
    severity: 2
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: latencyAlertQuery
  }
  {
    name: 'error-rate'
    displayName: 'GMSA admission: a cluster\'s admissions failing (${environmentName})'
    description: 'More than ${errorRateAlertPercent}% of a cluster\'s admissions in 15 minutes were refused with an error (5xx: its API server, the admission budget, or the webhook itself), not a policy denial.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: errorRateAlertQuery
  }
  {
    name: 'denial-spike'
    displayName: 'GMSA admission: sudden rise in denials (${environmentName})'
    description: 'A cluster\'s denials in the last 10 minutes are far above its hour before: a removed credential spec or role binding, or a misbehaving deployment.'
    severity: 2
    evaluationFrequency: 'PT10M'
    windowSize: 'PT1H'
    query: denialSpikeAlertQuery
  }
  {
    name: 'no-traffic'
    displayName: 'GMSA admission: no admissions from a busy cluster (${environmentName})'
    description: 'No admission from a cluster in 30 minutes after a busy few hours: its webhook configuration, its relay, its secret or its network path may be broken.'
    severity: 2
    evaluationFrequency: 'PT15M'
    windowSize: 'PT6H'
    query: noTrafficAlertQuery
  }
]

resource alerts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [
  for rule in alertRules: {
    name: 'gmsa-${rule.name}-${uniqueString(appInsightsId)}'
    location: location
    tags: tags
    kind: 'LogAlert'
    properties: {
      displayName: rule.displayName
      description: rule.description
      severity: rule.severity
      enabled: true
      scopes: [
        appInsightsId
      ]
      evaluationFrequency: rule.evaluationFrequency
      windowSize: rule.windowSize
      autoMitigate: true
      criteria: {
        allOf: [
          {
            query: rule.query
            timeAggregation: 'Count'
            dimensions: [
              {
                name: clusterDimension
                operator: 'Include'
                values: [
                  '*'
                ]
              }
            ]
            operator: 'GreaterThan'
            threshold: 0
            failingPeriods: {
              numberOfEvaluationPeriods: 1
              minFailingPeriodsToAlert: 1
            }
          }
        ]
      }
      actions: {
        actionGroups: [
          actionGroup.id
        ]
      }
    }
  }
]

output workbookId string = workbook.id
output alertRuleNames array = [for (rule, index) in alertRules: alerts[index].name]
