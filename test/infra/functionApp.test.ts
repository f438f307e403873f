import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import type { Node } from "web-tree-sitter";
import * as assert from "uvu/assert";
import { readAdmissionSettings } from "../../lib/settings/admission.js";
import { readEndpointProtection } from "../../lib/settings/endpoint.js";
import { SettingsError } from "../../lib/settings/environment.js";
import {
  type BicepFile,
  type Declaration,
  callArguments,
  callName,
  declared,
  decorator,
  descendants,
  evaluate,
  infraFile,
  literal,
  loadInfra,
  memberPath,
  property,
  propertiesOf,
  repoRoot,
  resourcesOfType,
  stringParts,
  valueOf,
} from "./bicepTree.js";

interface Context {
  app: BicepFile;
  storage: BicepFile;
  monitoring: BicepFile;
  main: BicepFile;
  site: Declaration;
}

const hosting = suite<Context>("function app hosting");

hosting.before(async (context) => {
  context.app = await infraFile("infra/modules/function-app.bicep");
  context.storage = await infraFile("infra/modules/storage.bicep");
  context.monitoring = await infraFile("infra/modules/monitoring.bicep");
  context.main = await infraFile("infra/main.bicep");
  const [site] = resourcesOfType(context.app, "Microsoft.Web/sites");
  if (site === undefined) throw new Error("no Microsoft.Web/sites resource");
  context.site = site;
});

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

hosting("the plan is Flex Consumption (FC1) on Linux", ({ app }) => {
  const [plan] = resourcesOfType(app, "Microsoft.Web/serverfarms");
  assert.ok(plan !== undefined);
  assert.is(literal(property(bodyOf(plan), "sku", "name")), "FC1");
  assert.is(literal(property(bodyOf(plan), "sku", "tier")), "FlexConsumption");
  assert.is(property(bodyOf(plan), "properties", "reserved")?.text, "true");
});

hosting("the site is a Linux function app on that plan", ({ site }) => {
  assert.is(literal(property(bodyOf(site), "kind")), "functionapp,linux");
  assert.equal(memberPath(property(bodyOf(site), "properties", "serverFarmId")!), ["plan", "id"]);
});

hosting("runtime is node 22 through functionAppConfig.runtime", ({ site }) => {
  const runtime = property(bodyOf(site), "properties", "functionAppConfig", "runtime");
  assert.is(literal(property(runtime, "name")), "node");
  assert.is(literal(property(runtime, "version")), "22");
});

hosting("HTTPS only, TLS 1.2 at least (FTP is off through the publishing credential policies below)", ({ site }) => {
  const properties = property(bodyOf(site), "properties");
  assert.is(property(properties, "httpsOnly")?.text, "true");
  assert.is(literal(property(properties, "siteConfig", "minTlsVersion")), "1.2");
  assert.is(literal(property(properties, "siteConfig", "scmMinTlsVersion")), "1.2");
});

hosting("basic publishing credentials are off for ftp and scm", ({ app }) => {
  const policies = resourcesOfType(app, "Microsoft.Web/sites/basicPublishingCredentialsPolicies");
  const byName = new Map(policies.map((policy) => [literal(property(bodyOf(policy), "name")), policy]));
  for (const name of ["ftp", "scm"]) {
    const policy = byName.get(name);
    assert.ok(policy !== undefined, `no ${name} policy`);
    assert.is(property(bodyOf(policy), "parent")?.text, "site");
    assert.is(property(bodyOf(policy), "properties", "allow")?.text, "false");
    assert.is(policy.body?.condition, undefined, `${name} policy must not be conditional`);
  }
});

hosting("the package comes from a blob container with user-assigned identity authentication", ({ site }) => {
  const storage = property(bodyOf(site), "properties", "functionAppConfig", "deployment", "storage");
  assert.is(literal(property(storage, "type")), "blobContainer");
  assert.is(property(storage, "value")?.text, "deploymentContainerUrl");
  assert.is(literal(property(storage, "authentication", "type")), "UserAssignedIdentity");
  assert.is(property(storage, "authentication", "userAssignedIdentityResourceId")?.text, "identityResourceId");
  const identities = property(bodyOf(site), "identity", "userAssignedIdentities");
  assert.is(literal(property(bodyOf(site), "identity", "type")), "UserAssigned");
  assert.ok(identities !== undefined && identities.text.includes("${identityResourceId}"));
});

hosting("always-ready http instances, memory and instance count come from parameters", ({ app, site }) => {
  const scale = property(bodyOf(site), "properties", "functionAppConfig", "scaleAndConcurrency");
  assert.is(property(scale, "instanceMemoryMB")?.text, "instanceMemoryMB");
  assert.is(property(scale, "maximumInstanceCount")?.text, "maximumInstanceCount");
  const alwaysReady = property(scale, "alwaysReady");
  assert.ok(alwaysReady !== undefined);
  for (const [count, expected] of [
    [1, [{ name: "http", instanceCount: 1 }]],
    [3, [{ name: "http", instanceCount: 3 }]],
    [0, []],
  ] as const) {
    assert.equal(evaluate(app, alwaysReady, { bindings: { alwaysReadyHttpInstances: count } }), expected);
  }
  assert.is(valueOf(app, "alwaysReadyHttpInstances"), 1);
});

hosting("the instance's HTTP concurrency is set explicitly, and the app is told the same number", ({ app, site }) => {
  const http = property(bodyOf(site), "properties", "functionAppConfig", "scaleAndConcurrency", "triggers", "http");
  assert.is(property(http, "perInstanceConcurrency")?.text, "httpPerInstanceConcurrency");
  assert.is(appSettings(app).get("GMSA_INSTANCE_CONCURRENCY")?.text, "string(httpPerInstanceConcurrency)");
  // The documented default for the 2048 MB instances the module defaults to.
  assert.is(valueOf(app, "instanceMemoryMB"), 2048);
  assert.is(valueOf(app, "httpPerInstanceConcurrency"), 16);
});

hosting("main exposes the scale settings as parameters with the documented defaults", ({ main }) => {
  assert.is(valueOf(main, "alwaysReadyHttpInstances"), 1);
  assert.is(valueOf(main, "instanceMemoryMB"), 2048);
  assert.type(valueOf(main, "maximumInstanceCount"), "number");
});

const expectedSettings = [
  "AzureWebJobsStorage__accountName",
  "AzureWebJobsStorage__credential",
  "AzureWebJobsStorage__clientId",
  "APPLICATIONINSIGHTS_CONNECTION_STRING",
  "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
  "AZURE_CLIENT_ID",
  "GMSA_CLUSTER_ACCESS",
  "GMSA_AKS_RESOURCE_ID",
  "GMSA_AUTHORIZE_REQUESTING_USER",
  "GMSA_RANDOM_HOSTNAME",
  "GMSA_AUDIT",
  "GMSA_API_TIMEOUT_MS",
  "GMSA_AUTH_CACHE_TTL_SECONDS",
  "GMSA_ADMISSION_BUDGET_MS",
  "GMSA_MAX_CREDSPECS_PER_POD",
  "GMSA_MAX_PLACES_PER_POD",
  "GMSA_INSTANCE_CONCURRENCY",
  "GMSA_API_CONCURRENCY",
  "GMSA_API_MAX_WAITING",
  "GMSA_REQUIRE_FUNCTION_KEY",
  "GMSA_NETWORK_MODE",
  "GMSA_WIRING_MODE",
  "FUNCTIONS_NODE_BLOCK_ON_ENTRY_POINT_ERROR",
  "MALLOC_ARENA_MAX",
  "MALLOC_TRIM_THRESHOLD_",
];

/**
 * The settings of a single-cluster deployment as written: the object the union starts from and
 * the single cluster's access (singleClusterSettings); a fleet's are test/infra/fleet.test.ts's.
 */
function appSettings(app: BicepFile): Map<string, Node> {
  const [settings] = resourcesOfType(app, "Microsoft.Web/sites/config").filter(
    (config) => literal(property(bodyOf(config), "name")) === "appsettings",
  );
  assert.ok(settings !== undefined, "no appsettings config");
  assert.is(property(bodyOf(settings), "parent")?.text, "site");
  const properties = property(bodyOf(settings), "properties")!;
  assert.is(callName(properties), "union");
  const [written, ...added] = callArguments(properties);
  assert.equal(added.map((node) => node.text), ["singleClusterSettings", "fleetSettings"]);
  const single = declared(app, "var", "singleClusterSettings").value!.childForFieldName("alternative")!;
  return new Map([...propertiesOf(written!), ...propertiesOf(single)]);
}

hosting("app settings carry exactly the names the code reads, and no Flex-rejected ones", ({ app }) => {
  const settings = appSettings(app);
  assert.equal([...settings.keys()].sort(), [...expectedSettings].sort());
  for (const rejected of ["FUNCTIONS_EXTENSION_VERSION", "FUNCTIONS_WORKER_RUNTIME", "WEBSITE_RUN_FROM_PACKAGE", "AzureWebJobsStorage"]) {
    assert.not.ok(settings.has(rejected), rejected);
  }
});

hosting("the worker's allocator settings are numbers the C library reads", ({ app }) => {
  const settings = appSettings(app);
  for (const name of ["MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_"]) {
    const value = literal(settings.get(name));
    assert.ok(value !== undefined && /^[0-9]+$/.test(value), `${name} is a number: ${value}`);
  }
});

hosting("storage and Application Insights are reached with the identity, not keys", ({ app }) => {
  const settings = appSettings(app);
  assert.is(settings.get("AzureWebJobsStorage__accountName")?.text, "storageAccountName");
  assert.is(literal(settings.get("AzureWebJobsStorage__credential")), "managedidentity");
  assert.is(settings.get("AzureWebJobsStorage__clientId")?.text, "identityClientId");
  assert.is(settings.get("AZURE_CLIENT_ID")?.text, "identityClientId");
  const authentication = settings.get("APPLICATIONINSIGHTS_AUTHENTICATION_STRING");
  assert.ok(authentication !== undefined);
  assert.equal(
    stringParts(authentication).map((part) => ("text" in part ? part.text : `{${part.expression.text}}`)),
    ["ClientId=", "{identityClientId}", ";Authorization=AAD"],
  );
});

hosting("webhook settings map the parameters, booleans in lower case", ({ app }) => {
  const settings = appSettings(app);
  assert.is(literal(settings.get("GMSA_CLUSTER_ACCESS")), "entra");
  assert.is(settings.get("GMSA_AKS_RESOURCE_ID")?.text, "clusterResourceId");
  const scenarios = [
    { authorizeRequestingUser: false, randomHostname: false, apiTimeoutMs: 2000, authCacheTtlSeconds: 5, admissionBudgetMs: 4000, maxCredSpecsPerPod: 16, maxPlacesPerPod: 64, apiConcurrency: 16, apiMaxWaiting: 16, networkMode: "public", wireMode: "relay" },
    { authorizeRequestingUser: true, randomHostname: true, apiTimeoutMs: 1500, authCacheTtlSeconds: 30, admissionBudgetMs: 3000, maxCredSpecsPerPod: 3, maxPlacesPerPod: 5, apiConcurrency: 64, apiMaxWaiting: 0, networkMode: "private", wireMode: "url" },
  ];
  for (const bindings of scenarios) {
    const value = (name: string) => evaluate(app, settings.get(name)!, { bindings });
    assert.is(value("GMSA_AUTHORIZE_REQUESTING_USER"), String(bindings.authorizeRequestingUser));
    assert.is(value("GMSA_RANDOM_HOSTNAME"), String(bindings.randomHostname));
    assert.is(value("GMSA_API_TIMEOUT_MS"), String(bindings.apiTimeoutMs));
    assert.is(value("GMSA_AUTH_CACHE_TTL_SECONDS"), String(bindings.authCacheTtlSeconds));
    assert.is(value("GMSA_ADMISSION_BUDGET_MS"), String(bindings.admissionBudgetMs));
    assert.is(value("GMSA_MAX_CREDSPECS_PER_POD"), String(bindings.maxCredSpecsPerPod));
    assert.is(value("GMSA_MAX_PLACES_PER_POD"), String(bindings.maxPlacesPerPod));
    assert.is(value("GMSA_API_CONCURRENCY"), String(bindings.apiConcurrency));
    assert.is(value("GMSA_API_MAX_WAITING"), String(bindings.apiMaxWaiting));
    assert.is(value("GMSA_REQUIRE_FUNCTION_KEY"), String(bindings.networkMode === "public"));
    assert.is(value("GMSA_WIRING_MODE"), bindings.wireMode);
  }
});

hosting("the network mode, the wiring and the function-key setting agree: keyless only when private and called by the API server itself", ({ app }) => {
  const settings = appSettings(app);
  const deployments = [
    { networkMode: "public", wireMode: "relay", keyless: false },
    { networkMode: "private", wireMode: "relay", keyless: false },
    { networkMode: "private", wireMode: "url", keyless: true },
  ];
  for (const bindings of deployments) {
    const value = (name: string) => String(evaluate(app, settings.get(name)!, { bindings }));
    const env = {
      WEBSITE_SITE_NAME: "func-gmsa-abc",
      GMSA_NETWORK_MODE: value("GMSA_NETWORK_MODE"),
      GMSA_WIRING_MODE: value("GMSA_WIRING_MODE"),
      GMSA_REQUIRE_FUNCTION_KEY: value("GMSA_REQUIRE_FUNCTION_KEY"),
    };
    const protection = readEndpointProtection(env);
    assert.is(literal(settings.get("FUNCTIONS_NODE_BLOCK_ON_ENTRY_POINT_ERROR")), "true", "an entry point that throws stops the app");
    assert.is(protection.networkMode, bindings.networkMode);
    assert.is(protection.wiringMode, bindings.wireMode);
    assert.is(protection.requireFunctionKey, !bindings.keyless, JSON.stringify(bindings));
  }
});

hosting("main hands the app the wiring it tells the wiring step", ({ main }) => {
  const params = property(declared(main, "module", "functionApp").body?.object, "params");
  assert.is(property(params, "wireMode")?.text, "wireMode");
});

hosting("main passes the identity's client ID and the documented setting defaults", ({ main }) => {
  const params = property(declared(main, "module", "functionApp").body?.object, "params");
  assert.equal(memberPath(property(params, "identityClientId")!), ["identity", "outputs", "clientId"]);
  assert.equal(memberPath(property(params, "identityResourceId")!), ["identity", "outputs", "resourceId"]);
  assert.is(valueOf(main, "authorizeRequestingUser"), false);
  assert.is(valueOf(main, "randomHostname"), false);
  assert.is(valueOf(main, "apiTimeoutMs"), 2000);
  assert.is(valueOf(main, "authCacheTtlSeconds"), 5);
});

hosting("the credential-spec and concurrency limits default to the product's own and pass from main to the app", ({ main, app }) => {
  const settings = appSettings(app);
  const defaults = readAdmissionSettings({ KUBECONFIG: "/k" });
  const azdParameters = JSON.parse(readFileSync(join(repoRoot, "infra/main.parameters.json"), "utf8")) as { parameters: Record<string, { value?: unknown }> };
  const deployed = readAdmissionSettings({
    KUBECONFIG: "/k",
    GMSA_MAX_CREDSPECS_PER_POD: String(evaluate(app, settings.get("GMSA_MAX_CREDSPECS_PER_POD")!)),
    GMSA_MAX_PLACES_PER_POD: String(evaluate(app, settings.get("GMSA_MAX_PLACES_PER_POD")!)),
    GMSA_API_CONCURRENCY: String(evaluate(app, settings.get("GMSA_API_CONCURRENCY")!)),
    GMSA_INSTANCE_CONCURRENCY: String(evaluate(app, settings.get("GMSA_INSTANCE_CONCURRENCY")!)),
  });
  assert.is(deployed.instanceConcurrency, defaults.instanceConcurrency);
  assert.is(deployed.maxCredSpecsPerPod, defaults.maxCredSpecsPerPod);
  assert.is(deployed.maxPlacesPerPod, defaults.maxPlacesPerPod);
  assert.is(deployed.apiConcurrency, defaults.apiConcurrency);
  const params = property(declared(main, "module", "functionApp").body?.object, "params");
  // As many may wait as there are slots, unless set: in the app and in the module alike.
  assert.is(String(evaluate(app, settings.get("GMSA_API_MAX_WAITING")!, { bindings: { apiConcurrency: 40 } })), "40");
  assert.is(property(params, "apiMaxWaiting")?.text, "apiMaxWaiting", "main passes apiMaxWaiting to the app");
  assert.is(valueOf(main, "apiMaxWaiting"), defaults.apiMaxWaiting);
  const limits = [
    ["maxCredSpecsPerPod", defaults.maxCredSpecsPerPod, "GMSA_MAX_CREDSPECS_PER_POD"],
    ["maxPlacesPerPod", defaults.maxPlacesPerPod, "GMSA_MAX_PLACES_PER_POD"],
    ["apiConcurrency", defaults.apiConcurrency, "GMSA_API_CONCURRENCY"],
    ["httpPerInstanceConcurrency", defaults.instanceConcurrency, "GMSA_INSTANCE_CONCURRENCY"],
  ] as const;
  for (const [name, product, variable] of limits) {
    assert.is(valueOf(main, name), product, `main's ${name} defaults to the product's`);
    assert.is(property(params, name)?.text, name, `main passes ${name} to the app`);
    assert.is(azdParameters.parameters[name]?.value, `\${${variable}=${product}}`, `azd maps ${variable} to ${name}`);
    // The bounds are the setting's own: a deployment the app would refuse to start with is refused first.
    for (const file of [main, app]) {
      const declaration = declared(file, "param", name);
      const bound = (which: string) => Number(evaluate(file, callArguments(decorator(declaration, which)!)[0]!));
      assert.not.throws(() => readAdmissionSettings({ KUBECONFIG: "/k", [variable]: String(bound("minValue")) }));
      assert.not.throws(() => readAdmissionSettings({ KUBECONFIG: "/k", [variable]: String(bound("maxValue")) }));
      assert.throws(() => readAdmissionSettings({ KUBECONFIG: "/k", [variable]: String(bound("maxValue") + 1) }), (error: unknown) => error instanceof SettingsError);
    }
  }
});

hosting("storage refuses shared keys and old TLS", ({ storage }) => {
  const [account] = resourcesOfType(storage, "Microsoft.Storage/storageAccounts");
  assert.ok(account !== undefined);
  const properties = property(bodyOf(account), "properties");
  assert.is(property(properties, "allowSharedKeyAccess")?.text, "false");
  assert.is(property(properties, "allowBlobPublicAccess")?.text, "false");
  assert.is(literal(property(properties, "minimumTlsVersion")), "TLS1_2");
});

hosting("Application Insights is workspace-based and accepts Entra auth only", ({ monitoring }) => {
  const [component] = resourcesOfType(monitoring, "Microsoft.Insights/components");
  assert.ok(component !== undefined);
  const properties = property(bodyOf(component), "properties");
  assert.is(property(properties, "DisableLocalAuth")?.text, "true");
  assert.ok(property(properties, "WorkspaceResourceId") !== undefined);
});

hosting("no account key, SAS or listKeys anywhere in the infra", async () => {
  for (const file of (await loadInfra()).values()) {
    const texts = descendants(file.root, "string_content").map((node) => node.text);
    for (const text of texts) assert.not.match(text, /AccountKey|SharedAccessSignature|InstrumentationKey=/i, file.path);
    const calls = descendants(file.root, "call_expression").map((call) => call.childForFieldName("function")?.text ?? "");
    for (const name of calls) assert.not.match(name, /^list(Keys|AccountSas|ServiceSas)$|\.list(Keys|AccountSas|ServiceSas)$/i, file.path);
    const names = descendants(file.root, "identifier").map((node) => node.text);
    for (const name of names) assert.not.match(name, /AccountKey/i, file.path);
  }
});

hosting.run();
