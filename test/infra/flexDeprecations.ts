/**
 * What the Flex Consumption plan does not take, as data: the deprecations table of the Azure
 * Functions app settings reference ("Flex Consumption plan deprecations", functions-app-settings.md,
 * read at its 2025-12 revision), and the site configuration properties the resource provider
 * names when it refuses a write (Azure/azure-cli issue 31414: "The following site configuration
 * properties (Site.SiteConfig.FtpsState, ...) for Flex Consumption sites is invalid").
 */
export const flexDeprecatedAppSettings: readonly string[] = [
  "ENABLE_ORYX_BUILD",
  "FUNCTIONS_EXTENSION_VERSION",
  "FUNCTIONS_MAX_HTTP_CONCURRENCY",
  "FUNCTIONS_WORKER_DYNAMIC_CONCURRENCY_ENABLED",
  "FUNCTIONS_WORKER_PROCESS_COUNT",
  "FUNCTIONS_WORKER_RUNTIME",
  "FUNCTIONS_WORKER_RUNTIME_VERSION",
  "SCM_DO_BUILD_DURING_DEPLOYMENT",
  "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING",
  "WEBSITE_CONTENTOVERVNET",
  "WEBSITE_CONTENTSHARE",
  "WEBSITE_DNS_SERVER",
  "WEBSITE_MAX_DYNAMIC_APPLICATION_SCALE_OUT",
  "WEBSITE_NODE_DEFAULT_VERSION",
  "WEBSITE_RUN_FROM_PACKAGE",
  "WEBSITE_SKIP_CONTENTSHARE_VALIDATION",
  "WEBSITE_VNET_ROUTE_ALL",
];

/** Site properties (on `properties` or `properties.siteConfig`), compared without regard to case. */
export const flexDeprecatedSiteProperties: readonly string[] = [
  "alwaysOn",
  "containerSize",
  "dnsConfiguration",
  "ftpsState",
  "functionAppScaleLimit",
  "functionsRuntimeScaleMonitoringEnabled",
  "isReserved",
  "isXenon",
  "javaVersion",
  "linuxFxVersion",
  "netFrameworkVersion",
  "powerShellVersion",
  "preWarmedInstanceCount",
  "use32BitWorkerProcess",
  "vnetBackupRestoreEnabled",
  "vnetContentShareEnabled",
  "vnetImagePullEnabled",
  "vnetRouteAllEnabled",
  "windowsFxVersion",
];
