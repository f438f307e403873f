import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readHostSettings } from "../../host/hostSettings.js";
import { readAdmissionSettings, readPolicySettings } from "../../lib/settings/admission.js";
import { readEndpointProtection } from "../../lib/settings/endpoint.js";
import { SettingsError } from "../../lib/settings/environment.js";

const Settings = suite("readAdmissionSettings");

Settings("defaults everything but the cluster", () => {
  assert.equal(readAdmissionSettings({ KUBECONFIG: "/k" }), {
    randomHostname: false,
    authorizeRequestingUser: false,
    apiTimeoutMs: 2000,
    admissionBudgetMs: 4000,
    authCacheTtlMs: 5000,
    credSpecCache: true,
    apiConcurrency: 16,
    instanceConcurrency: 16,
    maxCredSpecsPerPod: 16,
    maxPlacesPerPod: 64,
    apiMaxWaiting: 16,
    credSpecCacheMaxSpecs: 5000,
    credSpecCacheMaxBytes: 64 * 1024 * 1024,
    cluster: { access: "kubeconfig", kubeconfig: "/k" },
  });
});

Settings("reads every value", () => {
  const settings = readAdmissionSettings({
    KUBECONFIG: "/k",
    GMSA_RANDOM_HOSTNAME: "true",
    GMSA_AUTHORIZE_REQUESTING_USER: "TRUE",
    GMSA_API_TIMEOUT_MS: "750",
    GMSA_ADMISSION_BUDGET_MS: "3000",
    GMSA_AUTH_CACHE_TTL_SECONDS: "0",
    GMSA_CREDSPEC_CACHE: "false",
    GMSA_API_CONCURRENCY: "4",
    GMSA_MAX_CREDSPECS_PER_POD: "3",
  });
  assert.is(settings.apiConcurrency, 4);
  assert.is(settings.apiMaxWaiting, 4, "as many may wait as there are API slots, unless set");
  assert.is(settings.maxCredSpecsPerPod, 3);
  assert.is(settings.authCacheTtlMs, 0);
  assert.is(settings.credSpecCache, false);
  assert.is(settings.randomHostname, true);
  assert.is(settings.authorizeRequestingUser, true);
  assert.is(settings.apiTimeoutMs, 750);
  assert.is(settings.admissionBudgetMs, 3000);
});

Settings("GMSA_API_MAX_WAITING may be set apart from the API slots, down to 0", () => {
  assert.is(readAdmissionSettings({ KUBECONFIG: "/k", GMSA_API_CONCURRENCY: "8", GMSA_API_MAX_WAITING: "0" }).apiMaxWaiting, 0);
  assert.is(readAdmissionSettings({ KUBECONFIG: "/k", GMSA_API_MAX_WAITING: "1024" }).apiMaxWaiting, 1024);
});

Settings("the credential spec cache's bounds are read", () => {
  const settings = readAdmissionSettings({ KUBECONFIG: "/k", GMSA_CREDSPEC_CACHE_MAX_SPECS: "0", GMSA_CREDSPEC_CACHE_MAX_BYTES: "1048576" });
  assert.equal([settings.credSpecCacheMaxSpecs, settings.credSpecCacheMaxBytes], [0, 1048576]);
});

Settings("picks in-cluster access inside a pod", () => {
  assert.equal(readAdmissionSettings({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }).cluster, { access: "in-cluster" });
});

Settings("picks Entra access when a managed cluster is named", () => {
  const id = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks1";
  assert.equal(readAdmissionSettings({ GMSA_AKS_RESOURCE_ID: id, AZURE_CLIENT_ID: "abc" }).cluster, { access: "entra", resourceId: id, clientId: "abc" });
  assert.equal(readAdmissionSettings({ GMSA_API_SERVER_URL: "https://aks-dns-1a2b.hcp.westeurope.azmk8s.io:443", GMSA_API_SERVER_CA: "PEM" }).cluster, {
    access: "entra",
    server: "https://aks-dns-1a2b.hcp.westeurope.azmk8s.io:443",
    caPem: "PEM",
  });
});

const bad: Array<[Record<string, string>, RegExp]> = [
  [{ GMSA_AKS_RESOURCE_ID: "/x", GMSA_API_SERVER_URL: "https://a" }, /name the cluster twice/],
  [{ GMSA_API_SERVER_URL: "http://aks.example" }, /GMSA_API_SERVER_URL must be an https URL/],
  [
    { GMSA_API_SERVER_URL: "https://aks.example" },
    /GMSA_API_SERVER_URL must name an AKS API server \(port 443, a host name under azmk8s\.io, .*not aks\.example: the managed identity's token/,
  ],
  [{ GMSA_API_SERVER_URL: "https://10.0.0.1:443" }, /GMSA_API_SERVER_URL must name an AKS API server/],
  [{ GMSA_API_SERVER_URL: "https://aks-dns.hcp.westeurope.azmk8s.io:6443" }, /GMSA_API_SERVER_URL must name an AKS API server .*not aks-dns\.hcp\.westeurope\.azmk8s\.io:6443/],
  [{ GMSA_API_SERVER_URL: "https://user:pw@aks-dns.hcp.westeurope.azmk8s.io" }, /GMSA_API_SERVER_URL: the API server URL must not carry credentials/],
  [{ GMSA_CLUSTER_ACCESS: "entra" }, /needs GMSA_AKS_RESOURCE_ID, or GMSA_API_SERVER_URL/],
  [{ KUBECONFIG: "/k", GMSA_RANDOM_HOSTNAME: "yes please" }, /GMSA_RANDOM_HOSTNAME must be true or false, got "yes please"/],
  [{ KUBECONFIG: "/k", GMSA_API_TIMEOUT_MS: "2s" }, /GMSA_API_TIMEOUT_MS must be a whole number from 50 to 30000, got "2s"/],
  [{ KUBECONFIG: "/k", GMSA_ADMISSION_BUDGET_MS: "60000" }, /GMSA_ADMISSION_BUDGET_MS must be a whole number from 100 to 29000/],
  [{ KUBECONFIG: "/k", GMSA_AUTH_CACHE_TTL_SECONDS: "-1" }, /GMSA_AUTH_CACHE_TTL_SECONDS must be a whole number from 0 to 300/],
  [{ KUBECONFIG: "/k", GMSA_API_CONCURRENCY: "0" }, /GMSA_API_CONCURRENCY must be a whole number from 1 to 256/],
  [{ KUBECONFIG: "/k", GMSA_API_MAX_WAITING: "1025" }, /GMSA_API_MAX_WAITING must be a whole number from 0 to 1024, got "1025"/],
  [{ KUBECONFIG: "/k", GMSA_API_MAX_WAITING: "-1" }, /GMSA_API_MAX_WAITING must be a whole number from 0 to 1024/],
  [{ KUBECONFIG: "/k", GMSA_CREDSPEC_CACHE_MAX_SPECS: "1000001" }, /GMSA_CREDSPEC_CACHE_MAX_SPECS must be a whole number from 0 to 1000000/],
  [{ KUBECONFIG: "/k", GMSA_CREDSPEC_CACHE_MAX_BYTES: "32MiB" }, /GMSA_CREDSPEC_CACHE_MAX_BYTES must be a whole number from 0 to 1073741824, got "32MiB"/],
  [{ KUBECONFIG: "/k", GMSA_MAX_CREDSPECS_PER_POD: "0" }, /GMSA_MAX_CREDSPECS_PER_POD must be a whole number from 1 to 1000, got "0"/],
  [{ KUBECONFIG: "/k", GMSA_MAX_CREDSPECS_PER_POD: "many" }, /GMSA_MAX_CREDSPECS_PER_POD must be a whole number from 1 to 1000/],
  [{ KUBECONFIG: "/k", GMSA_API_TIMEOUT_MS: "5000", GMSA_ADMISSION_BUDGET_MS: "1000" }, /must not exceed GMSA_ADMISSION_BUDGET_MS/],
  [{}, /no cluster to talk to/],
  [{ GMSA_CLUSTER_ACCESS: "kubeconfig" }, /needs KUBECONFIG/],
  [{ KUBECONFIG: "/k", GMSA_CLUSTER_ACCESS: "satellite" }, /GMSA_CLUSTER_ACCESS must be one of kubeconfig, in-cluster, entra/],
];
for (const [env, message] of bad) {
  Settings(`stops on ${JSON.stringify(env)}`, () => {
    try {
      readAdmissionSettings(env);
      assert.unreachable("should have thrown");
    } catch (error) {
      assert.instance(error, SettingsError);
      assert.match((error as Error).message, message);
    }
  });
}

Settings("reports every bad value at once", () => {
  try {
    readAdmissionSettings({ KUBECONFIG: "/k", GMSA_RANDOM_HOSTNAME: "x", GMSA_API_TIMEOUT_MS: "y" });
    assert.unreachable("should have thrown");
  } catch (error) {
    assert.is((error as SettingsError).problems.length, 2);
  }
});

Settings.run();

const Endpoints = suite("readEndpointProtection");
Endpoints("no function key and no network mode unless set", () => assert.equal(readEndpointProtection({}), { requireFunctionKey: false }));
Endpoints("decodes the function-key setting as every other boolean setting", () => {
  for (const value of ["true", "TRUE", " true", "true ", "1"]) assert.is(readEndpointProtection({ GMSA_REQUIRE_FUNCTION_KEY: value }).requireFunctionKey, true, value);
  for (const value of ["false", "0", ""]) assert.is(readEndpointProtection({ GMSA_REQUIRE_FUNCTION_KEY: value }).requireFunctionKey, false, value);
});
Endpoints("stops on a misspelt function-key setting, naming it", () => {
  for (const value of ["ture", "yes", "enabled"]) {
    assert.throws(() => readEndpointProtection({ GMSA_REQUIRE_FUNCTION_KEY: value }), new RegExp(`GMSA_REQUIRE_FUNCTION_KEY must be true or false, got "${value}"`));
  }
});
Endpoints("inside a pod the app must say how it is reached, and then keys follow the usual rule", () => {
  for (const env of [{ KUBERNETES_SERVICE_HOST: "10.0.0.1" }, { KUBERNETES_SERVICE_HOST: "10.0.0.1", GMSA_CLUSTER_ACCESS: "in-cluster" }]) {
    assert.throws(() => readEndpointProtection(env), /GMSA_NETWORK_MODE must be public or private inside a pod/, JSON.stringify(env));
  }
  assert.throws(
    () => readEndpointProtection({ KUBERNETES_SERVICE_HOST: "10.0.0.1", GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay" }),
    /needs GMSA_REQUIRE_FUNCTION_KEY=true/,
  );
  assert.equal(
    readEndpointProtection({ KUBERNETES_SERVICE_HOST: "10.0.0.1", GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" }).requireFunctionKey,
    true,
  );
});

Endpoints("public mode needs function keys; private mode wired by url may go without", () => {
  assert.throws(() => readEndpointProtection({ GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay" }), /GMSA_NETWORK_MODE=public needs GMSA_REQUIRE_FUNCTION_KEY=true/);
  assert.throws(
    () => readEndpointProtection({ GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "false" }),
    /needs GMSA_REQUIRE_FUNCTION_KEY=true/,
  );
  assert.equal(readEndpointProtection({ GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" }), {
    requireFunctionKey: true,
    networkMode: "public",
    wiringMode: "relay",
  });
  assert.equal(readEndpointProtection({ GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "url", GMSA_REQUIRE_FUNCTION_KEY: "false" }), {
    requireFunctionKey: false,
    networkMode: "private",
    wiringMode: "url",
  });
  assert.throws(
    () => readEndpointProtection({ GMSA_NETWORK_MODE: "Public", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" }),
    /GMSA_NETWORK_MODE must be one of public, private/,
  );
});
Endpoints("private mode behind the relay needs function keys: the relay's subnets are every pod's subnets", () => {
  for (const key of [undefined, "false", "0", ""]) {
    const env = { GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay", ...(key === undefined ? {} : { GMSA_REQUIRE_FUNCTION_KEY: key }) };
    assert.throws(() => readEndpointProtection(env), /GMSA_WIRING_MODE=relay needs GMSA_REQUIRE_FUNCTION_KEY=true/, JSON.stringify(env));
    assert.throws(() => readEndpointProtection({ ...env, WEBSITE_SITE_NAME: "func-gmsa-abc" }), /GMSA_WIRING_MODE=relay needs GMSA_REQUIRE_FUNCTION_KEY=true/);
  }
  assert.equal(readEndpointProtection({ GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" }), {
    requireFunctionKey: true,
    networkMode: "private",
    wiringMode: "relay",
  });
});
Endpoints("a deployment says how it is wired; url wiring is for private mode only", () => {
  assert.throws(
    () => readEndpointProtection({ GMSA_NETWORK_MODE: "private", GMSA_REQUIRE_FUNCTION_KEY: "false" }),
    /GMSA_NETWORK_MODE \(public or private\) and GMSA_WIRING_MODE \(url or relay\) go together/,
  );
  assert.throws(() => readEndpointProtection({ GMSA_WIRING_MODE: "url" }), /go together/);
  assert.throws(() => readEndpointProtection({ GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "direct" }), /GMSA_WIRING_MODE must be one of url, relay, got "direct"/);
  assert.throws(
    () => readEndpointProtection({ GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "url", GMSA_REQUIRE_FUNCTION_KEY: "true" }),
    /GMSA_WIRING_MODE=url needs GMSA_NETWORK_MODE=private/,
  );
});
Endpoints("on a Function App the network and wiring modes must be said", () => {
  assert.throws(
    () => readEndpointProtection({ WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_REQUIRE_FUNCTION_KEY: "false" }),
    /GMSA_NETWORK_MODE must be public or private on a Function App/,
  );
  assert.throws(() => readEndpointProtection({ WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_REQUIRE_FUNCTION_KEY: "true" }), /GMSA_NETWORK_MODE must be public or private/);
  assert.throws(() => readEndpointProtection({ WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_NETWORK_MODE: "private" }), /go together/);
  assert.equal(readEndpointProtection({ WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "url" }), {
    requireFunctionKey: false,
    networkMode: "private",
    wiringMode: "url",
  });
});
Endpoints.run();

const Host = suite("readHostSettings");
Host("serves on 8443 with a generated certificate by default", () => assert.equal(readHostSettings({}), { port: 8443 }));
Host("takes a port and a certificate pair", () => {
  assert.equal(readHostSettings({ PORT: "9443", TLS_CERT_FILE: "/c", TLS_KEY_FILE: "/k" }), { port: 9443, tlsFiles: { cert: "/c", key: "/k" } });
});
Host("refuses half a certificate pair and a bad port", () => {
  assert.throws(() => readHostSettings({ TLS_CERT_FILE: "/c" }), /TLS_CERT_FILE and TLS_KEY_FILE go together/);
  assert.throws(() => readHostSettings({ PORT: "70000" }), /PORT must be a port number/);
  assert.throws(() => readHostSettings({ PORT: "http" }), /PORT must be a port number/);
  assert.throws(() => readHostSettings({ GMSA_REQUIRE_FUNCTION_KEY: "true" }), /needs GMSA_FUNCTION_KEY/);
});
Host("reads the function-key setting as the functions do: any spelling of true needs a key, a typo stops it", () => {
  for (const value of ["1", " true", "TRUE "]) assert.throws(() => readHostSettings({ GMSA_REQUIRE_FUNCTION_KEY: value }), /needs GMSA_FUNCTION_KEY/, value);
  assert.throws(() => readHostSettings({ GMSA_REQUIRE_FUNCTION_KEY: "ture", GMSA_FUNCTION_KEY: "k" }), /GMSA_REQUIRE_FUNCTION_KEY must be true or false/);
  assert.equal(readHostSettings({ GMSA_REQUIRE_FUNCTION_KEY: "1", GMSA_FUNCTION_KEY: "k" }), { port: 8443, functionKey: "k" });
});
Host.run();

const Policy = suite("readPolicySettings");

Policy("reads the webhook's policy settings alone, with the webhook's defaults, and names a bad one", () => {
  assert.equal(readPolicySettings({}), { randomHostname: false, authorizeRequestingUser: false, maxCredSpecsPerPod: 16, maxPlacesPerPod: 64 });
  assert.equal(readPolicySettings({ GMSA_AUTHORIZE_REQUESTING_USER: "true", GMSA_MAX_CREDSPECS_PER_POD: "4", GMSA_MAX_PLACES_PER_POD: "8" }), {
    randomHostname: false,
    authorizeRequestingUser: true,
    maxCredSpecsPerPod: 4,
    maxPlacesPerPod: 8,
  });
  assert.throws(() => readPolicySettings({ GMSA_MAX_CREDSPECS_PER_POD: "0" }), /GMSA_MAX_CREDSPECS_PER_POD/);
  assert.throws(() => readPolicySettings({ GMSA_MAX_PLACES_PER_POD: "1001" }), /GMSA_MAX_PLACES_PER_POD/);
});

Policy.run();
