/**
 * The tables the portal's queries may read, with Application Insights' own column names and
 * types. A query scoped to an Application Insights resource (the workbook's items and the log
 * alerts here) sees the classic `traces` table; a query scoped to the Log Analytics workspace
 * sees the same rows as `AppTraces`, with other names.
 *
 * Columns and types: Microsoft Learn, "Migrate to workspace-based Application Insights
 * resources", section "AppTraces" (legacy table: traces), which lists each classic column with
 * its type next to the workspace column:
 * https://learn.microsoft.com/azure/azure-monitor/app/convert-classic-resource#apptraces
 * and "Azure Monitor Logs reference - AppTraces":
 * https://learn.microsoft.com/azure/azure-monitor/reference/tables/apptraces
 */
export interface KustoColumn {
  readonly name: string;
  readonly type: "string" | "int" | "long" | "real" | "bool" | "datetime" | "dynamic" | "guid";
}

export interface KustoTable {
  readonly name: string;
  readonly description: string;
  readonly columns: readonly KustoColumn[];
}

const string = (name: string): KustoColumn => ({ name, type: "string" });

export const traces: KustoTable = {
  name: "traces",
  description: "Application Insights traces, as a query scoped to the Application Insights resource sees them",
  columns: [
    { name: "timestamp", type: "datetime" },
    string("message"),
    { name: "severityLevel", type: "int" },
    { name: "customDimensions", type: "dynamic" },
    { name: "customMeasurements", type: "dynamic" },
    string("operation_Name"),
    string("operation_Id"),
    string("operation_ParentId"),
    string("operation_SyntheticSource"),
    string("session_Id"),
    string("user_Id"),
    string("user_AuthenticatedId"),
    string("user_AccountId"),
    string("application_Version"),
    string("client_Type"),
    string("client_Model"),
    string("client_OS"),
    string("client_IP"),
    string("client_City"),
    string("client_StateOrProvince"),
    string("client_CountryOrRegion"),
    string("client_Browser"),
    string("cloud_RoleName"),
    string("cloud_RoleInstance"),
    string("appId"),
    string("appName"),
    string("iKey"),
    string("sdkVersion"),
    string("itemId"),
    string("itemType"),
    { name: "itemCount", type: "int" },
  ],
};

export const appTraces: KustoTable = {
  name: "AppTraces",
  description: "Application Insights traces, as a query scoped to the Log Analytics workspace sees them",
  columns: [
    { name: "TimeGenerated", type: "datetime" },
    string("Message"),
    { name: "SeverityLevel", type: "int" },
    { name: "Properties", type: "dynamic" },
    { name: "Measurements", type: "dynamic" },
    string("OperationName"),
    string("OperationId"),
    string("ParentId"),
    string("SyntheticSource"),
    string("SessionId"),
    string("UserId"),
    string("UserAuthenticatedId"),
    string("UserAccountId"),
    string("AppVersion"),
    string("ClientType"),
    string("ClientModel"),
    string("ClientOS"),
    string("ClientIP"),
    string("ClientCity"),
    string("ClientStateOrProvince"),
    string("ClientCountryOrRegion"),
    string("ClientBrowser"),
    string("AppRoleName"),
    string("AppRoleInstance"),
    string("_ResourceId"),
    string("IKey"),
    string("SDKVersion"),
    { name: "ItemCount", type: "int" },
    string("ReferencedItemId"),
    string("ReferencedType"),
    string("ResourceGUID"),
    string("SourceSystem"),
    string("TenantId"),
    string("Type"),
    string("_ItemId"),
    { name: "_BilledSize", type: "real" },
    string("_IsBillable"),
    string("_SubscriptionId"),
  ],
};

/**
 * Application Insights requests, as a query scoped to the Application Insights resource sees them:
 * one row per function invocation the Functions host timed (Azure Monitor's table reference,
 * "requests"). `duration` is in milliseconds; `success` and `resultCode` are strings there.
 */
export const requests: KustoTable = {
  name: "requests",
  description: "Application Insights requests, as a query scoped to the Application Insights resource sees them",
  columns: [
    { name: "timestamp", type: "datetime" },
    string("id"),
    string("source"),
    string("name"),
    string("url"),
    string("success"),
    string("resultCode"),
    { name: "duration", type: "real" },
    string("performanceBucket"),
    { name: "customDimensions", type: "dynamic" },
    { name: "customMeasurements", type: "dynamic" },
    ...traces.columns.filter((column) => /^(operation_|session_|user_|application_|client_|cloud_|app|iKey|sdkVersion|itemId|itemType|itemCount)/.test(column.name)),
  ],
};

/**
 * AKS control-plane logs in a Log Analytics workspace, resource-specific mode (Azure Monitor's
 * table reference, "AKSControlPlane"): kube-apiserver among its categories.
 */
export const aksControlPlane: KustoTable = {
  name: "AKSControlPlane",
  description: "AKS control-plane diagnostic logs, as a query scoped to the Log Analytics workspace sees them",
  columns: [
    { name: "TimeGenerated", type: "datetime" },
    string("Category"),
    string("Level"),
    string("Message"),
    string("PodName"),
    string("Stream"),
    string("SourceSystem"),
    string("TenantId"),
    string("Type"),
    string("_ResourceId"),
    string("_SubscriptionId"),
    { name: "_BilledSize", type: "real" },
    string("_IsBillable"),
  ],
};
