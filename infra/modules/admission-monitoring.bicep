// The portal view of admissions: a workbook and alert rules over the one structured line the
// webhooks write per admission and the canary's line per cluster, split by the cluster each line
// names (a fleet's member, or "default" for a single-cluster deployment): one dashboard for the
// whole fleet, one alert per cluster whose pods are blocked. Field names come from the same files
// the code uses, so a renamed field breaks this build instead of silently emptying the charts.
// Every alert links its section of docs/runbook.md.
param location string
param tags object
param environmentName string

@description('Application Insights component that receives the webhooks\' traces.')
param appInsightsId string

@description('The p95 latency alert fires above this many milliseconds: below the admission budget, so it fires while admissions still finish.')
param latencyAlertThresholdMs int

@description('Email address for the alerts; empty sends none.')
param alertEmail string = ''

@description('Existing action groups (resource IDs) for severity 0 and 1 alerts: pods are being refused, or the path that admits them is broken. Used beside the email receiver.')
param criticalActionGroupIds array = []

@description('Existing action groups (resource IDs) for severity 2 alerts: degraded, pods still admitted.')
param warningActionGroupIds array = []

@description('The clusters the canary reports on: "default" for a single cluster, else each fleet member\'s name. A cluster that never reports is seen because it is listed here.')
param canaryClusters array = [
  'default'
]

@description('The canary runs (GMSA_CANARY): its heartbeat alerts are deployed only then.')
param canaryEnabled bool = true

@description('Minutes without a successful canary after which a cluster\'s heartbeat alert fires: at least three runs of its five-minute schedule.')
param canaryHeartbeatMinutes int = 20

@description('Days before the webhooks\' CA bundle (the relay\'s certificate, in relay wiring) expires below which a cluster\'s alert fires; wiring again renews it from 60 days before.')
param caExpiryAlertDays int = 30

@description('The app runs the credential spec audit (GMSA_AUDIT): deploy its alert on new error findings.')
param auditEnabled bool = false

@description('The app\'s Log Analytics workspace: with apiServerLogs, the clusters\' kube-apiserver logs arrive there (api-server-logs.bicep).')
param workspaceId string

@description('The clusters\' kube-apiserver logs are sent to the workspace (main.bicep\'s opt-in apiServerLogs): the alert on the API server failing to call the webhooks is deployed only then.')
param apiServerLogs bool = false

@description('Where docs/runbook.md is published for the on-call (the repository\'s URL of the file, say); each alert links its section. Empty: the alerts name the file and section.')
param runbookUrl string = ''

@description('Admissions refused in 5 minutes because the Kubernetes API server failed, that raise an alert.')
param apiErrorThreshold int = 5

@description('Denials in the last 10 minutes below which no spike is reported.')
param denialSpikeMinimum int = 20

@description('A spike is this many times the denials of an average 10 minutes of the hour before.')
param denialSpikeFactor int = 5

@description('Admissions refused with an error, with none decided, in 10 minutes that mean a cluster is hard down: the rate rule needs volume, this one does not.')
param hardDownErrors int = 3

@minValue(1)
@maxValue(100)
@description('A cluster\'s error rate alert fires above this share of its admissions failing (refused with 5xx: API server, budget, internal), in percent.')
param errorRateAlertPercent int = 5

@description('Admissions of a cluster in the window below which its error rate is not judged.')
param errorRateMinimum int = 10

var admissionLog = loadJsonContent('../../lib/observability/admission-log.json')
var field = admissionLog.fields
var canaryLog = loadJsonContent('../../lib/observability/canary-log.json')
var clusterEvents = loadJsonContent('../../lib/observability/cluster-events.json')
var cacheEvents = loadJsonContent('../../lib/observability/cache-events.json')
var auditLog = loadJsonContent('../../lib/observability/audit-log.json')
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
    ', CorrelationId = tostring(entry["${field.correlationId}"])'
    ', Instance = cloud_RoleInstance'
  ],
  '\n'
)

// One row per canary run and cluster: whether the dry-run GMSA pod went through the whole path
// (API server, wiring, webhooks, policy), and which hop failed when it did not.
var canaries = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| where tostring(entry["${canaryLog.fields.event}"]) == "${canaryLog.event}"'
    '| project timestamp'
    ', ItemCount = itemCount'
    ', Cluster = tostring(entry["${canaryLog.fields.cluster}"])'
    ', Outcome = tostring(entry["${canaryLog.fields.outcome}"])'
    ', Summary = tostring(entry["${canaryLog.fields.summary}"])'
    ', LatencyMs = todouble(entry["${canaryLog.fields.latencyMs}"])'
    ', CaDaysLeft = toint(entry["${canaryLog.fields.caBundleDaysLeft}"])'
  ],
  '\n'
)

// The lines the function writes when it answers a request without judging a review: a cluster
// kept out of service by its settings, a wrong secret, and every other refusal (no cluster at that
// address, not a review, too large, its own failure: status 500), each with the HTTP status.
var clusterEventLines = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| extend Event = tostring(entry["${clusterEvents.fields.event}"])'
    '| where Event in ("${clusterEvents.unavailable}", "${clusterEvents.secretRefused}", "${clusterEvents.requestRefused}")'
    '| project timestamp, ItemCount = itemCount, Event, Cluster = tostring(entry["${clusterEvents.fields.cluster}"]), Status = toint(entry["${clusterEvents.fields.status}"]), Reason = tostring(entry["${clusterEvents.fields.reason}"])'
  ],
  '\n'
)

// One row per change of a credential spec cache's state (lib/observability/cacheEvents.ts): a
// watch that failed, a resync, a cache stopped past its bounds, answers served stale (Specs counts
// those answers on such a row).
var cacheLines = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| where tostring(entry["${cacheEvents.fields.event}"]) == "${cacheEvents.event}"'
    '| project timestamp, ItemCount = itemCount, Cluster = tostring(entry["${cacheEvents.fields.cluster}"]), State = tostring(entry["${cacheEvents.fields.state}"]), Specs = toint(entry["${cacheEvents.fields.specs}"]), Reason = tostring(entry["${cacheEvents.fields.reason}"])'
  ],
  '\n'
)

// The configured clusters, as a table: a cluster that writes nothing at all still has a row.
var canaryClusterTable = 'datatable(Cluster: string) [${join(map(canaryClusters, name => '"${name}"'), ', ')}]'
// Per configured cluster, its canary runs in the window: none ready is a cluster whose pods are
// blocked (or whose canary cannot run), silence included.
var canaryStatus = join(
  [
    'let runs = ${canaries};'
    'let perCluster = ${canaryClusterTable}'
    '    | join kind=leftouter (runs | summarize Ready = sumif(ItemCount, Outcome == "${canaryLog.ready}"), Runs = sum(ItemCount), arg_max(timestamp, Outcome, Summary) by Cluster) on Cluster'
    '    | project Cluster, Ready = coalesce(Ready, 0), Runs = coalesce(Runs, 0), LastRun = timestamp, LastOutcome = coalesce(Outcome, "no canary line"), LastSummary = Summary;'
    'let failing = toscalar(perCluster | where Ready == 0 | count);'
  ],
  '\n'
)

// The credential spec audit's lines (GMSA_AUDIT): one per finding and one summary per cluster and
// run, every line of a run naming it. Findings of one object keep their kind from run to run, so
// (Cluster, Kind, Object) is the same finding in two runs.
var auditFindings = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| where tostring(entry["${auditLog.fields.event}"]) == "${auditLog.finding}"'
    '| project timestamp, ItemCount = itemCount, Cluster = tostring(entry["${auditLog.fields.cluster}"]), Run = tostring(entry["${auditLog.fields.run}"]), Kind = tostring(entry["${auditLog.fields.kind}"]), Severity = tostring(entry["${auditLog.fields.severity}"]), Object = tostring(entry["${auditLog.fields.object}"]), Problem = tostring(entry["${auditLog.fields.problem}"]), Action = tostring(entry["${auditLog.fields.action}"])'
  ],
  '\n'
)
var auditSummaries = join(
  [
    'traces'
    '| where message startswith "{"'
    '| extend entry = parse_json(message)'
    '| where tostring(entry["${auditLog.fields.event}"]) == "${auditLog.summary}"'
    '| project timestamp, ItemCount = itemCount, Cluster = tostring(entry["${auditLog.fields.cluster}"]), Run = tostring(entry["${auditLog.fields.run}"]), Outcome = tostring(entry["${auditLog.fields.outcome}"]), Errors = toint(entry["${auditLog.fields.errors}"]), Warnings = toint(entry["${auditLog.fields.warnings}"]), ApiCalls = toint(entry["${auditLog.fields.apiCalls}"]), LatencyMs = todouble(entry["${auditLog.fields.latencyMs}"]), Reason = tostring(entry["${auditLog.fields.reason}"])'
  ],
  '\n'
)
// Each cluster's latest audited run (Rank 1) and the one before it (Rank 2).
var auditRuns = join(
  [
    'let runs = ${auditSummaries}'
    '    | where Outcome == "${auditLog.audited}"'
    '    | summarize At = max(timestamp) by Cluster, Run'
    '    | sort by Cluster asc, At desc'
    '    | extend Rank = row_number(1, prev(Cluster) != Cluster)'
    '    | where Rank <= 2'
    '    | project Cluster, Run, Rank;'
  ],
  '\n'
)
// One row per finding of those two runs: whether it is new, gone, or repeated. ItemCount stays the
// rows of the latest run it stands for.
var auditChanges = join(
  [
    auditRuns
    auditFindings
    '| join kind=inner (runs) on Cluster, Run'
    '| summarize InPrevious = sumif(ItemCount, Rank == 2), Severity = take_any(Severity), Problem = take_any(Problem), Action = take_any(Action), ItemCount = sumif(ItemCount, Rank == 1) by Cluster, Kind, Object'
    '| extend Change = case(InPrevious == 0, "new", ItemCount == 0, "gone", "repeated")'
  ],
  '\n'
)

// The workbook's cluster filter: every query of a chart keeps the chosen clusters ('*' is all).
var chosen = '| where "*" in ({Cluster}) or Cluster in ({Cluster})'
var admissionsChosen = '${admissions}\n${chosen}'
// Time charts are series over the workbook's range and grain with silence drawn as zero: a cluster
// that stops writing shows a line falling to nothing, not a line that simply ends.
var series = 'on timestamp from {TimeRange:start} to {TimeRange:end} step {TimeRange:grain}'
var admissionsPerMinuteQuery = '${admissionsChosen}\n| extend Decision = strcat(Webhook, ": ", Decision)\n| make-series Admissions = sum(ItemCount) default=0 ${series} by Decision'
var denialsQuery = '${admissionsChosen}\n| where Decision == "${decisionDenied}"\n| summarize Denials = sum(ItemCount) by Cluster, Webhook, Reason, Namespace\n| order by Denials desc'
var latencyQuery = '${admissionsChosen}\n| summarize percentilesw(LatencyMs, ItemCount, 50, 95, 99) by bin(timestamp, {TimeRange:grain})\n| project timestamp, p50 = percentile_LatencyMs_50, p95 = percentile_LatencyMs_95, p99 = percentile_LatencyMs_99'
// What the API server waited for: the Functions host's request, from arrival to answer, of every
// webhook function (route names from lib/app/webhooks.ts), beside the handler's own time above.
var webhookFunctionNames = '@"^(cluster-(secret-)?)?(mutate|validate|validate-credspec)$"'
var requestLatencyQuery = 'requests\n| where name matches regex ${webhookFunctionNames}\n| summarize percentilesw(duration, itemCount, 50, 95, 99) by bin(timestamp, {TimeRange:grain})\n| project timestamp, p50 = percentile_duration_50, p95 = percentile_duration_95, p99 = percentile_duration_99'
var apiServerQuery = '${admissionsChosen}\n| make-series Calls = sum(ApiCalls * ItemCount) default=0, Errors = sum(ApiErrors * ItemCount) default=0 ${series}'
var cacheQuery = '${admissionsChosen}\n| summarize Hits = sum(CacheHits * ItemCount), Misses = sum(CacheMisses * ItemCount) by bin(timestamp, {TimeRange:grain})\n| extend HitRatio = iff(Hits + Misses == 0, real(null), todouble(Hits) / (Hits + Misses))\n| project timestamp, HitRatio'
// The fleet: one row per configured cluster (and any other that wrote a line), the worst first. A
// cluster that wrote nothing has its row, with nothing in it.
var fleetOverviewQuery = join(
  [
    'let lines = union (${admissions} | project timestamp, Cluster), (${canaries} | project timestamp, Cluster), (${clusterEventLines} | project timestamp, Cluster)'
    '    | summarize LastLine = max(timestamp) by Cluster;'
    'let judged = ${admissions}'
    '    | summarize Admissions = sum(ItemCount), Denied = sumif(ItemCount, Decision == "${decisionDenied}"), Errors = sumif(ItemCount, Decision == "${decisionError}"), ApiErrors = sum(ApiErrors * ItemCount), P95 = percentilew(LatencyMs, ItemCount, 95) by Cluster;'
    '${canaryClusterTable}'
    '| union (lines | project Cluster)'
    '| distinct Cluster'
    '${chosen}'
    '| join kind=leftouter judged on Cluster'
    '| join kind=leftouter lines on Cluster'
    '| project Cluster, Admissions = coalesce(Admissions, 0), Denied = coalesce(Denied, 0), Errors = coalesce(Errors, 0), ErrorRatePercent = iff(coalesce(Admissions, 0) == 0, real(null), round(100.0 * Errors / Admissions, 2)), P95, ApiErrors = coalesce(ApiErrors, 0), LastLine, MinutesSinceLastLine = iff(isnull(LastLine), long(null), datetime_diff("minute", now(), LastLine))'
    '| order by isnull(LastLine) desc, ErrorRatePercent desc, Admissions desc'
  ],
  '\n'
)
var admissionsByClusterQuery = '${admissionsChosen}\n| make-series Admissions = sum(ItemCount) default=0 ${series} by Cluster'
var errorsByClusterQuery = '${admissionsChosen}\n| where Decision == "${decisionError}"\n| make-series Errors = sum(ItemCount) default=0 ${series} by Cluster'
var latencyByClusterQuery = '${admissionsChosen}\n| summarize P95 = percentilew(LatencyMs, ItemCount, 95) by Cluster, bin(timestamp, {TimeRange:grain})'
var apiErrorsByClusterQuery = '${admissionsChosen}\n| make-series ApiErrors = sum(ApiErrors * ItemCount) default=0 ${series} by Cluster'
// Cold starts as the API server feels them: each admission's latency by the age of the instance
// that answered (minutes since that instance's first line in the range), so a slow first minute
// of new instances shows apart from a slow steady state.
var coldStartQuery = join(
  [
    'let firstLine = traces | summarize FirstLine = min(timestamp) by Instance = cloud_RoleInstance;'
    '${admissionsChosen}'
    '| join kind=inner firstLine on Instance'
    '| extend Age = case(timestamp - FirstLine < 1m, "1: first minute", timestamp - FirstLine < 10m, "2: 1 to 10 minutes", "3: older")'
    '| summarize Admissions = sum(ItemCount), P50 = percentilew(LatencyMs, ItemCount, 50), P95 = percentilew(LatencyMs, ItemCount, 95) by Age'
    '| order by Age asc'
  ],
  '\n'
)
// The caches' trouble by cluster: watch failures, stops and stale answers over time (a resync ends
// a failure), and the latest state of each cluster's cache with its reason.
var cacheTroubleQuery = '${cacheLines}\n${chosen}\n| where State != "${cacheEvents.states.synced}"\n| extend Series = strcat(Cluster, ": ", State), Answers = iff(State == "${cacheEvents.states.staleServed}", Specs, 1)\n| make-series Events = sum(Answers * ItemCount) default=0 ${series} by Series'
var cacheStateQuery = '${cacheLines}\n${chosen}\n| summarize arg_max(timestamp, State, Specs, Reason) by Cluster\n| order by Cluster asc'
// The ID a refusal's message carries (what a kubectl user sees) finds its line, whichever it is.
// The clusters to choose from: the configured ones and any other that wrote an admission line.
var clusterChoicesQuery = '${canaryClusterTable}\n| union (${admissions} | distinct Cluster)\n| distinct Cluster\n| order by Cluster asc'
var correlationQuery = 'traces\n| where isnotempty("{CorrelationId}") and message has "{CorrelationId}"\n| project timestamp, Instance = cloud_RoleInstance, severityLevel, message\n| order by timestamp desc\n| take 50'

// The credential spec health tab: each cluster's latest audit, its findings by kind, and what
// changed since the run before, down to each object and what to do about it.
var auditHealthQuery = '${auditSummaries}\n${chosen}\n| summarize arg_max(timestamp, Outcome, Errors, Warnings, ApiCalls, LatencyMs, Reason) by Cluster\n| project Cluster, LastAudit = timestamp, Outcome, Errors, Warnings, ApiCalls, LatencyMs, Reason\n| order by Errors desc, Cluster asc'
var auditFindingsByKindQuery = '${auditRuns}\n${auditFindings}\n| join kind=inner (runs | where Rank == 1) on Cluster, Run\n${chosen}\n| summarize Findings = sum(ItemCount) by Cluster, Kind, Severity\n| order by Cluster asc, Findings desc'
var auditChangesQuery = '${auditChanges}\n${chosen}\n| project Change, Cluster, Severity, Kind, Object, Problem, Action\n| order by Change desc, Cluster asc, Severity asc, Kind asc, Object asc'

// Each alert query returns one row per cluster whose condition holds; the rules split by the
// Cluster column (a dimension), so each such cluster fires, and resolves, on its own.
// Only admissions that failed: a call that failed once and then succeeded on a retry leaves an
// API error on a line that was still decided. A cluster whose API server is down, slow or
// unreachable fails closed for itself alone, and this says which.
var apiErrorAlertQuery = '${admissions}\n| where Decision == "${decisionError}" and ApiErrors > 0\n| summarize Refused = sum(ItemCount) by Cluster\n| where Refused >= ${apiErrorThreshold}'
var latencyAlertQuery = '${admissions}\n| summarize P95 = percentilew(LatencyMs, ItemCount, 95), Admissions = sum(ItemCount) by Cluster\n| where Admissions >= 10 and P95 > ${latencyAlertThresholdMs}'
var errorRateAlertQuery = '${admissions}\n| summarize Errors = sumif(ItemCount, Decision == "${decisionError}"), Admissions = sum(ItemCount) by Cluster\n| where Admissions >= ${errorRateMinimum} and 100.0 * Errors / Admissions > ${errorRateAlertPercent}'
var denialSpikeAlertQuery = '${admissions}\n| where Decision == "${decisionDenied}"\n| summarize Recent = sumif(ItemCount, timestamp > ago(10m)), Earlier = sumif(ItemCount, timestamp <= ago(10m)) by Cluster\n| where Recent >= ${denialSpikeMinimum} and Recent > ${denialSpikeFactor} * (Earlier / 5.0)'
// A cluster whose admissions all fail, however few: the rate rule above needs volume.
var hardDownAlertQuery = '${admissions}\n| summarize Errors = sumif(ItemCount, Decision == "${decisionError}"), Decided = sumif(ItemCount, Decision != "${decisionError}") by Cluster\n| where Errors >= ${hardDownErrors} and Decided == 0'
// The heartbeat: a configured cluster with no ready canary in the window. While two or more are
// failing the fleet rule fires instead (the app or its identity is at fault, not each cluster),
// and this one returns nothing.
var canaryHeartbeatAlertQuery = '${canaryStatus}\nperCluster\n| where Ready == 0 and failing < 2\n| project Cluster, Runs, LastRun, LastOutcome, LastSummary'
var canaryFleetAlertQuery = '${canaryStatus}\nperCluster\n| where Ready == 0 and failing >= 2\n| summarize Clusters = make_list(Cluster), Outcomes = make_set(LastOutcome)\n| extend Cluster = "(fleet)", Failing = array_length(Clusters)'
// The webhooks' CA bundle close to expiry, per cluster, as the canary last read it: past expiry the
// API server can no longer call the webhooks and every GMSA pod is refused.
var caExpiryAlertQuery = '${canaries}\n| where isnotnull(CaDaysLeft)\n| summarize arg_max(timestamp, CaDaysLeft) by Cluster\n| where CaDaysLeft < ${caExpiryAlertDays}\n| project Cluster, CaDaysLeft, LastRead = timestamp'
// Error findings of a cluster's latest audit that its audit before did not report: each will stop a
// pod (a spec refused on a node, a pod whose spec is gone or whose grant was taken back), so they
// are told once, as they appear; the rule resolves once the next run reports them again, or no longer.
var auditErrorsAlertQuery = '${auditChanges}\n| where Severity == "${auditLog.errorSeverity}" and Change == "new"\n| summarize NewErrors = sum(ItemCount), Example = take_any(strcat(Object, ": ", Problem)) by Cluster'
var clusterUnavailableAlertQuery = '${clusterEventLines}\n| where Event == "${clusterEvents.unavailable}"\n| summarize Lines = sum(ItemCount), Reason = take_any(Reason) by Cluster'
var clusterSecretRefusedAlertQuery = '${clusterEventLines}\n| where Event == "${clusterEvents.secretRefused}"\n| summarize Refused = sum(ItemCount), Reason = take_any(Reason) by Cluster'
var functionErrorsAlertQuery = '${clusterEventLines}\n| where Event == "${clusterEvents.requestRefused}" and Status >= 500\n| summarize Failed = sum(ItemCount), Reason = take_any(Reason) by Cluster'
// The workbook's recent failures: failed admissions and refused requests together, the latest first.
var recentFailuresQuery = 'union\n(${admissions}\n| where Decision == "${decisionError}"\n| project timestamp, Cluster, What = strcat("admission: ", Webhook), Status = Code, Reason, CorrelationId),\n(${clusterEventLines}\n| project timestamp, Cluster, What = Event, Status, Reason)\n${chosen}\n| order by timestamp desc\n| take 100'
var canaryQuery = '${canaryStatus}\nperCluster\n${chosen}\n| order by Ready asc, Cluster asc'

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
          {
            id: guid(appInsightsId, 'cluster')
            version: 'KqlParameterItem/1.0'
            name: 'Cluster'
            label: 'Cluster'
            type: 2
            multiSelect: true
            quote: '\''
            delimiter: ','
            query: clusterChoicesQuery
            timeContextFromParameter: 'TimeRange'
            queryType: 0
            resourceType: componentsType
            typeSettings: {
              additionalResourceOptions: [
                'value::all'
              ]
              selectAllValue: '*'
              showDefault: false
            }
            value: [
              'value::all'
            ]
          }
          {
            id: guid(appInsightsId, 'correlation-id')
            version: 'KqlParameterItem/1.0'
            name: 'CorrelationId'
            label: 'Correlation ID (from a refusal\'s message)'
            type: 1
            value: ''
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
      name: 'recent-failures'
      content: {
        version: 'KqlItem/1.0'
        title: 'Recent failures: failed admissions and refused requests, the latest first'
        query: recentFailuresQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'correlation-search'
      conditionalVisibility: {
        parameterName: 'CorrelationId'
        comparison: 'isNotEqualTo'
        value: ''
      }
      content: {
        version: 'KqlItem/1.0'
        title: 'Lines with the correlation ID {CorrelationId}'
        query: correlationQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'canary'
      content: {
        version: 'KqlItem/1.0'
        title: 'Canary per cluster: dry-run GMSA pods through the whole path (0 ready: its pods are likely refused)'
        query: canaryQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'admissions-per-minute'
      content: {
        version: 'KqlItem/1.0'
        title: 'Admissions by webhook and decision'
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
        title: 'Handler latency p50 / p95 / p99 (ms)'
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
      name: 'request-latency'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Webhook requests end to end, as the Functions host timed them: p50 / p95 / p99 (ms, every cluster)'
        query: requestLatencyQuery
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
      name: 'credspec-cache-trouble'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Credential spec caches: watch failures, stops and answers served stale, by cluster'
        query: cacheTroubleQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'credspec-cache-state'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Credential spec cache of each cluster: its latest state'
        query: cacheStateQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'cold-starts'
      content: {
        version: 'KqlItem/1.0'
        title: 'Admission latency by the age of the instance that answered (cold starts)'
        query: coldStartQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 1
      name: 'credspec-health-title'
      content: {
        json: '### Credential spec health\nThe audit the canary\'s timer runs with GMSA_AUDIT: what will fail on a node or at the next admission before a pod finds out.'
      }
    }
    {
      type: 3
      name: 'credspec-health'
      content: {
        version: 'KqlItem/1.0'
        title: 'Each cluster\'s latest credential spec audit'
        query: auditHealthQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'credspec-findings-by-kind'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Findings of each cluster\'s latest audit, by kind'
        query: auditFindingsByKindQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'credspec-changes'
      customWidth: '50'
      content: {
        version: 'KqlItem/1.0'
        title: 'Findings new, gone or unchanged since the audit before, by object'
        query: auditChangesQuery
        size: 0
        timeContextFromParameter: 'TimeRange'
        queryType: 0
        resourceType: componentsType
        visualization: 'table'
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

// Only with an email to send to: an action group without receivers notifies nobody.
resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: 'ag-gmsa-${uniqueString(appInsightsId)}'
  location: 'Global'
  tags: tags
  properties: {
    groupShortName: 'gmsa-adm'
    enabled: true
    emailReceivers: [
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
    name: 'hard-down'
    displayName: 'GMSA admission: every admission of a cluster failing (${environmentName})'
    description: 'At least ${hardDownErrors} of a cluster\'s admissions in 10 minutes were refused with an error and none was decided: its GMSA pods are all refused, however few there are.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    query: hardDownAlertQuery
  }
  {
    name: 'cluster-unavailable'
    displayName: 'GMSA admission: a cluster not served (${environmentName})'
    description: 'The function keeps a cluster out of service (its settings, its kubeconfig or its API server address are wrong), or refused a request for a cluster it does not serve: every GMSA pod of that cluster is refused.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: clusterUnavailableAlertQuery
  }
  {
    name: 'function-errors'
    displayName: 'GMSA admission: the function failing on its own (${environmentName})'
    description: 'The function answered a request with a 5xx before judging it (an unexpected failure: a defect, or a broken deployment). The API server refuses the pod; no admission line is written, this line is.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: functionErrorsAlertQuery
  }
  {
    name: 'cluster-secret-refused'
    displayName: 'GMSA admission: requests with a wrong cluster secret (${environmentName})'
    description: 'Requests for a cluster came with a wrong or missing secret: a rotated secret not yet re-wired (its pods are refused), or someone probing the endpoint.'
    severity: 2
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    query: clusterSecretRefusedAlertQuery
  }
]

// The canary's rules: a heartbeat per configured cluster, and one for the fleet.
var canaryAlertRules = [
  {
    name: 'canary-heartbeat'
    displayName: 'GMSA admission: a cluster\'s canary failing or silent (${environmentName})'
    description: 'No dry-run GMSA pod went through a cluster\'s whole path (API server, wiring, webhooks) in ${canaryHeartbeatMinutes} minutes, or no canary line came at all: its GMSA pods are most likely refused. LastOutcome names the hop that failed.'
    severity: 1
    evaluationFrequency: 'PT5M'
    windowSize: 'PT${canaryHeartbeatMinutes}M'
    query: canaryHeartbeatAlertQuery
  }
  {
    name: 'canary-fleet'
    displayName: 'GMSA admission: the canary failing on several clusters (${environmentName})'
    description: 'Two or more clusters had no successful canary in ${canaryHeartbeatMinutes} minutes: the function app, its identity or its settings are at fault rather than each cluster. The per-cluster heartbeat stays quiet while this fires.'
    severity: 0
    evaluationFrequency: 'PT5M'
    windowSize: 'PT${canaryHeartbeatMinutes}M'
    query: canaryFleetAlertQuery
  }
  {
    name: 'webhook-ca-expiring'
    displayName: 'GMSA admission: a cluster\'s webhook certificate expiring (${environmentName})'
    description: 'The CA bundle of a cluster\'s webhook configurations (in relay wiring, the relay\'s certificate) expires in less than ${caExpiryAlertDays} days, as the canary read it: once it has, the API server cannot call the webhooks and every GMSA pod is refused. Wire the cluster again to renew it.'
    severity: 2
    evaluationFrequency: 'PT1H'
    windowSize: 'PT1H'
    query: caExpiryAlertQuery
  }
]

// The audit's rule: its window holds a cluster's last two runs at the default interval (15 minutes).
var auditAlertRules = [
  {
    name: 'credspec-audit-errors'
    displayName: 'GMSA admission: new error findings of a cluster\'s credential spec audit (${environmentName})'
    description: 'The latest credential spec audit of a cluster reported error findings its previous run did not: a credential spec that nodes will refuse, running pods whose spec is gone or whose service account lost `use` (their workloads\' next pods will fail to start or be refused), or the product\'s wiring deleted or changed by hand (pods may get a credential spec unchecked); the workbook\'s credential spec health tab lists each object and what to do.'
    severity: 2
    evaluationFrequency: 'PT15M'
    windowSize: 'PT2H'
    query: auditErrorsAlertQuery
  }
]

var deployedAlertRules = concat(alertRules, canaryEnabled ? canaryAlertRules : [], canaryEnabled && auditEnabled ? auditAlertRules : [])

// Every rule's section in docs/runbook.md is its name.
var runbookBase = empty(runbookUrl) ? 'docs/runbook.md' : runbookUrl

// Who is told: severities 0 and 1 reach the critical groups, 2 the warning groups, both the email.
var emailGroups = empty(alertEmail) ? [] : [actionGroup.id]

resource alerts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [
  for rule in deployedAlertRules: {
    name: 'gmsa-${rule.name}-${uniqueString(appInsightsId)}'
    location: location
    tags: tags
    kind: 'LogAlert'
    properties: {
      displayName: rule.displayName
      description: '${rule.description} Runbook: ${runbookBase}#${rule.name}'
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
        actionGroups: concat(emailGroups, rule.severity <= 1 ? criticalActionGroupIds : warningActionGroupIds)
        customProperties: {
          runbook: '${runbookBase}#${rule.name}'
        }
      }
    }
  }
]

// The API server's own words, opt-in: when it cannot call a webhook (certificate, address, key,
// timeout) the function writes nothing, but kube-apiserver logs the failed call. One row per
// cluster (the AKS resource's name); AKSControlPlane is not sampled, so rows are counted as they are.
var apiServerWebhookCallsQuery = join(
  [
    'AKSControlPlane'
    '| where Category == "kube-apiserver"'
    '| where Message contains "gmsa-admission.windows.k8s.io" and Message contains "failed calling webhook"'
    '| summarize Failures = count(), Example = take_any(Message) by AksCluster = tostring(split(_ResourceId, "/")[8])'
  ],
  '\n'
)

resource apiServerWebhookCallsAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = if (apiServerLogs) {
  name: 'gmsa-api-server-webhook-calls-${uniqueString(appInsightsId)}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'GMSA admission: a cluster\'s API server failing to call the webhooks (${environmentName})'
    description: 'kube-apiserver logged failed calls to the product\'s webhooks (TLS, address, function key, timeout): with failurePolicy Fail its GMSA pods are refused, and the function sees none of it. AksCluster names the cluster. Runbook: ${runbookBase}#api-server-webhook-calls'
    severity: 1
    enabled: true
    scopes: [
      workspaceId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT10M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: apiServerWebhookCallsQuery
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'AksCluster'
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
      actionGroups: concat(emailGroups, criticalActionGroupIds)
      customProperties: {
        runbook: '${runbookBase}#api-server-webhook-calls'
      }
    }
  }
}

output workbookId string = workbook.id
output alertRuleNames array = [for (rule, index) in deployedAlertRules: alerts[index].name]

@description('Empty when every alert reaches someone; otherwise what to set so that it does.')
output alertRoutingWarning string = empty(alertEmail) && empty(criticalActionGroupIds)
  ? 'No alert reaches anyone: set alertEmail (GMSA_ALERT_EMAIL) or criticalActionGroupIds. The rules are deployed and show in the portal.'
  : ''
