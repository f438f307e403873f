import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterSecretSettingName, memberNamePattern } from "../../cluster/fleetMember.js";
import {
  type BicepFile,
  type Declaration,
  type Value,
  callArguments,
  callName,
  decorator,
  declared,
  evaluate,
  infraFile,
  literal,
  property,
  repoRoot,
  resourcesOfType,
  valueOf,
} from "./bicepTree.js";

/**
 * A fleet from one deployment: `clusters` lists the members; each gets the identity's access on
 * its AKS cluster, its secret in Key Vault behind a Key Vault reference, its place in
 * GMSA_CLUSTERS and, when asked, its wiring. With no members the deployment is today's.
 */
interface Context {
  main: BicepFile;
  app: BicepFile;
  vault: BicepFile;
  network: BicepFile;
}

const fleet = suite<Context>("a fleet of clusters", {} as Context);

fleet.before(async (context) => {
  context.main = await infraFile("infra/main.bicep");
  context.app = await infraFile("infra/modules/function-app.bicep");
  context.vault = await infraFile("infra/modules/cluster-secrets.bicep");
  context.network = await infraFile("infra/modules/network.bicep");
});

function bodyOf(declaration: Declaration) {
  if (declaration.body === undefined) throw new Error(`${declaration.name} has no body`);
  return declaration.body.object;
}

const aks = (subscription: string, group: string, name: string) => `/subscriptions/${subscription}/resourceGroups/${group}/providers/Microsoft.ContainerService/managedClusters/${name}`;
/** Plain JSON, as a deployment passes parameters. */
const json = (value: unknown): Value => JSON.parse(JSON.stringify(value));
const memberList: ReadonlyArray<{ readonly name: string; readonly aksResourceId: string; readonly wire?: { readonly installCrd: boolean } }> = [
  { name: "alpha", aksResourceId: aks("1111", "rg-one", "aks-shared-name") },
  { name: "west-eu-2", aksResourceId: aks("2222", "rg-two", "aks-shared-name"), wire: { installCrd: false } },
];
const members = json(memberList);
const secretUris = ["https://kv-gmsa-abc.vault.azure.net/secrets/cluster-secret-alpha/0123", "https://kv-gmsa-abc.vault.azure.net/secrets/cluster-secret-west-eu-2/4567"];

/** What the function app's settings resource writes for these parameters. */
function settings(app: BicepFile, bindings: Record<string, Value>): Record<string, Value> {
  const [config] = resourcesOfType(app, "Microsoft.Web/sites/config");
  assert.ok(config !== undefined);
  const required = {
    location: "westeurope",
    tags: {},
    resourceToken: "abc",
    networkMode: "public",
    wireMode: "relay",
    identityResourceId: "/id",
    identityClientId: "client-id",
    storageAccountName: "st",
    deploymentContainerUrl: "https://st/app-package",
    appInsightsConnectionString: "InstrumentationKey=x",
    clusterResourceId: "",
  };
  const value = evaluate(app, property(bodyOf(config), "properties")!, { bindings: { ...required, ...bindings } });
  assert.ok(value !== null && typeof value === "object" && !Array.isArray(value));
  return value as Record<string, Value>;
}

fleet("the members are a typed list of at most 64, empty by default; their secrets and relay keys come in @secure() objects", ({ main }) => {
  const clusters = declared(main, "param", "clusters");
  assert.is(clusters.type, "fleetMember[]");
  assert.equal(valueOf(main, "clusters"), []);
  assert.equal(callArguments(decorator(clusters, "maxLength")!).map((node) => node.text), ["64"]);
  for (const name of ["clusterSecrets", "clusterRelayTlsKeys"]) {
    const param = declared(main, "param", name);
    assert.is(param.type, "object");
    assert.ok(param.decorators.some((call) => call.text === "secure()"), `${name} is @secure()`);
    assert.equal(valueOf(main, name), {});
  }
  assert.match(declared(main, "type", "fleetMember").node.text, /@minLength\(1\)\s+@maxLength\(63\)[\s\S]*name: string\s+[\s\S]*aksResourceId: string[\s\S]*wire: fleetMemberWiring\?/);
});

fleet("each member gets the identity's access on its own AKS cluster, in that cluster's subscription and resource group", ({ main }) => {
  const access = declared(main, "module", "memberAccess");
  assert.is(access.target, "modules/cluster-access.bicep");
  assert.ok(access.body?.loop !== undefined, "one module per member");
  assert.match(access.body!.loop!.text, /^\[\s*for member in clusters:/);
  const object = bodyOf(access);
  const scope = property(object, "scope")!;
  assert.is(callName(scope), "resourceGroup");
  const names = new Set<Value>();
  const roles = new Set<Value>();
  for (const member of memberList) {
    const bindings = { member: json(member), resourceToken: "abc", environmentName: "prod" };
    assert.equal(
      callArguments(scope).map((node) => evaluate(main, node, { bindings })),
      [member.aksResourceId.split("/")[2], member.aksResourceId.split("/")[4]],
    );
    assert.is(evaluate(main, property(object, "params", "clusterName")!, { bindings }), "aks-shared-name");
    names.add(evaluate(main, property(object, "name")!, { bindings }));
    roles.add(evaluate(main, property(object, "params", "roleNameSuffix")!, { bindings }));
    assert.ok(String([...names].at(-1)).length <= 64, "a deployment name has at most 64 characters");
  }
  assert.is(names.size, memberList.length, "one deployment name per member");
  assert.is(roles.size, memberList.length, "custom role names stay unique although the clusters share a name");
  assert.is(property(object, "params", "principalId")?.text, "identity.outputs.principalId");
  assert.is(property(object, "params", "includeSubjectAccessReviews")?.text, "authorizeRequestingUser");
  assert.is(property(object, "params", "clusterUsesAzureRbac")?.text, "clusterUsesAzureRbac");
});

fleet("the members' secrets live in an RBAC-authorized Key Vault that the app's identity alone reads (Key Vault Secrets User)", ({ main, vault }) => {
  const module = declared(main, "module", "clusterSecretVault");
  assert.is(module.target, "modules/cluster-secrets.bicep");
  assert.is(module.body?.condition?.text, "(fleet)");
  assert.is(property(bodyOf(module), "params", "principalId")?.text, "identity.outputs.principalId");
  assert.equal(evaluate(main, property(bodyOf(module), "params", "clusterNames")!, { bindings: { clusters: members } }), ["alpha", "west-eu-2"]);
  const [keyVault] = resourcesOfType(vault, "Microsoft.KeyVault/vaults");
  assert.ok(keyVault !== undefined);
  const properties = property(bodyOf(keyVault), "properties");
  assert.is(property(properties, "enableRbacAuthorization")?.text, "true");
  assert.is(property(properties, "accessPolicies"), undefined, "no access policies");
  assert.ok(String(evaluate(vault, property(bodyOf(keyVault), "name")!, { bindings: { resourceToken: "abcdefghijklm" } })).length <= 24);
  const [assignment] = resourcesOfType(vault, "Microsoft.Authorization/roleAssignments");
  assert.ok(assignment !== undefined);
  const roleDefinition = property(bodyOf(assignment), "properties", "roleDefinitionId")!;
  assert.is(evaluate(vault, callArguments(roleDefinition)[1]!), "4633458b-17de-408a-b874-0445c86b69e6");
  assert.is(property(bodyOf(assignment), "scope")?.text, "vault");
  assert.is(resourcesOfType(vault, "Microsoft.Authorization/roleAssignments").length, 1, "nobody else is granted anything");
  const [secret] = resourcesOfType(vault, "Microsoft.KeyVault/vaults/secrets");
  assert.ok(secret?.body?.loop !== undefined, "one secret per member");
  assert.is(property(bodyOf(secret), "properties", "value")?.text, "clusterSecrets[name]");
  for (const name of ["alpha", "west-eu-2"]) {
    assert.match(String(evaluate(vault, property(bodyOf(secret), "properties", "contentType")!, { bindings: { name } })), new RegExp(`\\(${clusterSecretSettingName(name)}\\)$`));
  }
  assert.match(declared(vault, "output", "referenceUris").node.text, /secretUriWithVersion/, "versioned references: a new secret reaches the app at once");
});

fleet("private mode: the vault has no public endpoint, and a private endpoint where the storage endpoints are, in a zone linked to the function VNet", ({ main, vault, network }) => {
  const [keyVault] = resourcesOfType(vault, "Microsoft.KeyVault/vaults");
  const properties = property(bodyOf(keyVault!), "properties");
  const scenario = (privateMode: boolean) => ({
    access: evaluate(vault, property(properties, "publicNetworkAccess")!, { bindings: { privateMode } }),
    acls: evaluate(vault, property(properties, "networkAcls")!, { bindings: { privateMode } }),
  });
  assert.equal(scenario(true), { access: "Disabled", acls: { defaultAction: "Deny", bypass: "None" } });
  assert.equal(scenario(false), { access: "Enabled", acls: { defaultAction: "Allow", bypass: "AzureServices" } });
  const [endpoint] = resourcesOfType(vault, "Microsoft.Network/privateEndpoints");
  assert.is(endpoint?.body?.condition?.text, "(privateMode)");
  assert.match(property(bodyOf(endpoint!), "properties", "privateLinkServiceConnections")!.text, /groupIds: \[\s*'vault'\s*\]/);
  const params = property(bodyOf(declared(main, "module", "clusterSecretVault")), "params");
  assert.is(property(params, "privateMode")?.text, "privateMode");
  assert.is(property(params, "endpointSubnetId")?.text, "network.?outputs.storageEndpointSubnetId ?? ''");
  assert.is(property(params, "dnsZoneId")?.text, "network.?outputs.keyVaultDnsZoneId ?? ''");
  assert.is(property(bodyOf(declared(main, "module", "network")), "params", "keyVaultEndpoint")?.text, "fleet");
  const zone = declared(network, "resource", "keyVaultDnsZone");
  assert.is(zone.body?.condition?.text, "(keyVaultEndpoint)");
  assert.is(literal(property(bodyOf(zone), "name")), "privatelink.vaultcore.azure.net");
  assert.is(declared(network, "resource", "keyVaultDnsLink").body?.condition?.text, "(keyVaultEndpoint)");
  assert.is(valueOf(network, "keyVaultEndpoint"), false);
});

fleet("the app gets GMSA_CLUSTERS built from the list and one Key Vault reference per member, and no single-cluster access setting", ({ app }) => {
  const written = settings(app, { clusters: json(memberList.map(({ name, aksResourceId }) => ({ name, aksResourceId }))), clusterVaultReferenceUris: secretUris });
  const clusters: unknown = JSON.parse(String(written["GMSA_CLUSTERS"]));
  assert.equal(clusters, { alpha: { aksResourceId: memberList[0]!.aksResourceId }, "west-eu-2": { aksResourceId: memberList[1]!.aksResourceId } });
  for (const name of Object.keys(clusters as object)) assert.match(name, memberNamePattern);
  assert.is(written[clusterSecretSettingName("alpha")], `@Microsoft.KeyVault(SecretUri=${secretUris[0]})`);
  assert.is(written[clusterSecretSettingName("west-eu-2")], `@Microsoft.KeyVault(SecretUri=${secretUris[1]})`);
  assert.is(written["GMSA_CLUSTER_SECRET_WEST_EU_2"], `@Microsoft.KeyVault(SecretUri=${secretUris[1]})`);
  for (const single of ["GMSA_CLUSTER_ACCESS", "GMSA_AKS_RESOURCE_ID", "GMSA_API_SERVER_URL", "GMSA_API_SERVER_CA"]) assert.not.ok(single in written, `${single} is left out`);
  const secretSettings = Object.keys(written).filter((key) => key.startsWith("GMSA_CLUSTER_SECRET_"));
  assert.equal(secretSettings, ["GMSA_CLUSTER_SECRET_ALPHA", "GMSA_CLUSTER_SECRET_WEST_EU_2"]);
  assert.ok(Object.values(written).every((value) => typeof value === "string"), "every app setting is a string");
});

fleet("the site resolves the references with the app's identity (a VNet-integrated Flex app reaches the vault's private endpoint without vnetRouteAllEnabled)", ({ app }) => {
  const [site] = resourcesOfType(app, "Microsoft.Web/sites");
  const properties = property(bodyOf(site!), "properties");
  const reference = property(properties, "keyVaultReferenceIdentity")!;
  const one = { clusters: [{ name: "alpha", aksResourceId: memberList[0]!.aksResourceId }], identityResourceId: "/id" };
  assert.is(evaluate(app, reference, { bindings: one }), "/id");
  assert.is(evaluate(app, reference, { bindings: { clusters: [], identityResourceId: "/id" } }), null, "no fleet: the site as before");
  assert.is(property(properties, "siteConfig", "vnetRouteAllEnabled"), undefined, "Flex does not take it");
});

fleet("main hands the app the members and the vault's versioned URIs, and waits for the vault", ({ main }) => {
  const params = property(bodyOf(declared(main, "module", "functionApp")), "params");
  assert.equal(evaluate(main, property(params, "clusters")!, { bindings: { clusters: members } }), json(memberList.map(({ name, aksResourceId }) => ({ name, aksResourceId }))));
  assert.is(property(params, "clusterVaultReferenceUris")?.text, "clusterSecretVault.?outputs.referenceUris ?? []");
  assert.ok(property(bodyOf(declared(main, "module", "functionApp")), "dependsOn")?.text.includes("clusterSecretVault"));
});

fleet("an empty list changes nothing: today's settings, no vault, no member access or wiring", ({ main, app }) => {
  const id = aks("1111", "rg-aks", "aks-one");
  const written = settings(app, { clusterResourceId: id });
  assert.is(written["GMSA_CLUSTER_ACCESS"], "entra");
  assert.is(written["GMSA_AKS_RESOURCE_ID"], id);
  assert.not.ok(Object.keys(written).some((key) => key === "GMSA_CLUSTERS" || key.startsWith("GMSA_CLUSTER_SECRET_")));
  assert.equal(Object.keys(settings(app, { clusterResourceId: id, clusters: [], clusterVaultReferenceUris: [] })), Object.keys(written), "the defaults are the empty fleet");
  assert.is(valueOf(main, "fleet"), false);
  assert.equal(evaluate(main, property(bodyOf(declared(main, "module", "functionApp")), "params", "clusters")!), []);
  assert.equal(evaluate(main, declared(main, "module", "memberAccess").body!.loop!, { bindings: { identity: {} } }), [], "no member, no access module");
  // The single cluster's access and wiring are where they were.
  assert.is(declared(main, "module", "clusterAccess").body?.condition?.text, "(hasCluster)");
  assert.is(declared(main, "module", "clusterWiring").body?.condition?.text, "(wiring)");
});

fleet("with a cluster ID and members both set, the app gets both and refuses to start, instead of serving one of them silently", ({ app }) => {
  const written = settings(app, { clusterResourceId: aks("1", "rg", "c"), clusters: [{ name: "alpha", aksResourceId: memberList[0]!.aksResourceId }], clusterVaultReferenceUris: [secretUris[0]!] });
  assert.ok("GMSA_CLUSTERS" in written && "GMSA_AKS_RESOURCE_ID" in written);
});

fleet("a member with `wire` is wired on its own paths with its secret (the new one while rotating), the others by npm run wire", ({ main }) => {
  const wiring = declared(main, "module", "memberWiring");
  assert.is(wiring.target, "modules/cluster-wiring.bicep");
  assert.ok(wiring.body?.loop !== undefined && wiring.body.condition !== undefined);
  const object = bodyOf(wiring);
  const secrets = { alpha: "A".repeat(40), "west-eu-2": `${"N".repeat(40)},${"O".repeat(40)}` };
  const keys = { "west-eu-2": "-----BEGIN PRIVATE KEY-----\n" };
  for (const [index, member] of memberList.entries()) {
    const bindings = { member: json(member), index, memberSecrets: secrets, clusterRelayTlsKeys: keys, resourceToken: "abc" };
    const wired = evaluate(main, wiring.body!.condition!, { bindings });
    assert.is(wired, "wire" in member, member.name);
    if (wired !== true) continue;
    assert.is(evaluate(main, property(object, "params", "clusterName")!, { bindings }), member.name);
    assert.is(evaluate(main, property(object, "params", "clusterSecret")!, { bindings }), "N".repeat(40), "the wiring presents the new secret");
    assert.is(evaluate(main, property(object, "params", "installCrd")!, { bindings }), false);
    assert.is(evaluate(main, property(object, "params", "relayTlsKey")!, { bindings }), keys["west-eu-2"]);
    assert.is(evaluate(main, property(object, "params", "relayAllowKonnectivity")!, { bindings }), true);
    assert.equal(evaluate(main, property(object, "params", "relayAllowFromCidrs")!, { bindings }), []);
  }
  assert.match(property(object, "params", "kubeConfig")!.text, /^member\.\?wire != null \? memberClusters\[index\]\.listClusterAdminCredential\(\)\.kubeconfigs\[0\]\.value : ''$/);
  assert.is(property(object, "params", "mode")?.text, "wireMode");
  assert.is(property(object, "params", "functionHost")?.text, "functionApp.outputs.defaultHostName");
  assert.ok(property(object, "dependsOn")?.text.includes("memberAccess"), "access first, then the webhooks that need it");
  assert.match(declared(main, "resource", "memberClusters").body!.loop!.text, /^\[\s*for member in clusters:/);
});

fleet("the member secrets come as an object, or for azd as base64 of its JSON (its substitution cannot carry braces); both merge", ({ main }) => {
  const encoded = Buffer.from(JSON.stringify({ beta: "B".repeat(40), alpha: "C".repeat(40) })).toString("base64");
  assert.equal(valueOf(main, "memberSecrets", { bindings: { clusterSecrets: { alpha: "A".repeat(40) } } }), { alpha: "A".repeat(40) });
  assert.equal(valueOf(main, "memberSecrets", { bindings: { clusterSecretsBase64: encoded } }), { beta: "B".repeat(40), alpha: "C".repeat(40) });
  assert.equal(valueOf(main, "memberSecrets", { bindings: { clusterSecrets: { alpha: "A".repeat(40), gamma: "G".repeat(40) }, clusterSecretsBase64: encoded } }), {
    alpha: "C".repeat(40),
    gamma: "G".repeat(40),
    beta: "B".repeat(40),
  });
  assert.ok(declared(main, "param", "clusterSecretsBase64").decorators.some((call) => call.text === "secure()"));
  assert.is(property(bodyOf(declared(main, "module", "clusterSecretVault")), "params", "clusterSecrets")?.text, "memberSecrets");
  const parameters: unknown = JSON.parse(readFileSync(join(repoRoot, "infra", "main.parameters.json"), "utf8"));
  assert.equal(JSON.stringify(parameters).match(/"(clusters|clusterSecretsBase64)":\{"value":"[^"]*"\}/g), ['"clusters":{"value":"${GMSA_CLUSTERS=[]}"}', '"clusterSecretsBase64":{"value":"${GMSA_CLUSTER_SECRETS_B64=}"}']);
});

fleet("the outputs name the members and the vault, for the workflow", ({ main }) => {
  assert.equal(evaluate(main, declared(main, "output", "FLEET_CLUSTERS").value!, { bindings: { clusters: members } }), ["alpha", "west-eu-2"]);
  assert.is(declared(main, "output", "FLEET_VAULT_NAME").value?.text, "clusterSecretVault.?outputs.name ?? ''");
});

fleet.run();
