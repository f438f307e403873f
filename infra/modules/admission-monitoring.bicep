// The portal view of admissions: a workbook and alert rules over the one structured line the
// webhooks write per admission. Field names come from the same file the code uses, so a
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
    '| project timestamp'
    ', ItemCount = itemCount'
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
var denialsQuery = '${admissions}\n| where Decision == "${decisionDenied}"\n| summarize Denials = sum(ItemCount) by Reason, Namespace\n| order by Denials desc'
var latencyQuery = '${admissions}\n| summarize percentilesw(LatencyMs, ItemCount, 50, 95, 99) by bin(timestamp, 5m)\n| project timestamp, p50 = percentile_LatencyMs_50, p95 = percentile_LatencyMs_95, p99 = percentile_LatencyMs_99'
var apiServerQuery = '${admissions}\n| summarize Calls = sum(ApiCalls * ItemCount), Errors = sum(ApiErrors * ItemCount) by bin(timestamp, 1m)'
var cacheQuery = '${admissions}\n| summarize Hits = sum(CacheHits * ItemCount), Misses = sum(CacheMisses * ItemCount) by bin(timestamp, 5m)\n| extend HitRatio = iff(Hits + Misses == 0, real(null), todouble(Hits) / (Hits + Misses))\n| project timestamp, HitRatio'
var coldStartQuery = '${admissions}\n| summarize ColdStarts = sumif(ItemCount, ColdStart), Admissions = sum(ItemCount) by bin(timestamp, 15m)'

// Each alert query returns a row only when its condition holds; the rules fire on any row.
// Only admissions that failed: a call that failed once and then succeeded on a retry leaves an
// API error on a line that was still decided.
var apiErrorAlertQuery = '${admissions}\n| where Decision == "${decisionError}" and ApiErrors > 0\n| summarize Refused = sum(ItemCount)\n| where Refused >= ${apiErrorThreshold}'
var latencyAlertQuery = '${admissions}\n| summarize P95 = percentilew(LatencyMs, ItemCount, 95), Admissions = sum(ItemCount)\n| where Admissions >= 10 and P95 > ${latencyAlertThresholdMs}'
var denialSpikeAlertQuery = '${admissions}\n| where Decision == "${decisionDenied}"\n| summarize Recent = sumif(ItemCount, timestamp > ago(10m)), Earlier = sumif(ItemCount, timestamp <= ago(10m))\n| where Recent >= ${denialSpikeMinimum} and Recent > ${denialSpikeFactor} * (Earlier / 5.0)'
var noTrafficAlertQuery = '${admissions}\n| summarize Recent = sumif(ItemCount, timestamp > ago(30m)), Earlier = sumif(ItemCount, timestamp <= ago(30m))\n| where Recent == 0 and Earlier >= ${busyClusterMinimum}'

var componentsType = 'microsoft.insights/components'

var workbookContent = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      name: 'title'
      content: {
        json: '## GMSA admission (${environmentName})\nOne line per admission from the mutate and validate webhooks.'
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
    displayName: 'GMSA admission: API-server errors (${environmentName})'
    description: 'Admissions were refused because calls to the Kubernetes API server failed (errors, timeouts, unreachable); GMSA pods fail closed while this lasts.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    query: apiErrorAlertQuery
  }
  {
    name: 'latency-near-timeout'
    displayName: 'GMSA admission: p95 latency near the admission budget (${environmentName})'
    description: 'p95 admission latency is above ${latencyAlertThresholdMs} ms, close to the admission budget: an admission that runs out of it refuses its GMSA pod (504).'
    severity: 2
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: latencyAlertQuery
  }
  {
    name: 'denial-spike'
    displayName: 'GMSA admission: sudden rise in denials (${environmentName})'
    description: 'Denials in the last 10 minutes are far above the hour before: a removed credential spec or role binding, or a misbehaving deployment.'
    severity: 2
    evaluationFrequency: 'PT10M'
    windowSize: 'PT1H'
    query: denialSpikeAlertQuery
  }
  {
    name: 'no-traffic'
    displayName: 'GMSA admission: no admissions from a busy cluster (${environmentName})'
    description: 'No admission in 30 minutes after a busy few hours: the webhook configuration, the relay or the network path may be broken.'
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
