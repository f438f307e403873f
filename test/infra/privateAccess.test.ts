import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  type BicepFile,
  type Declaration,
  type Value,
  decorator,
  callArguments,
  declarationsOf,
  declared,
  descendants,
  evaluate,
  infraFile,
  kids,
  literal,
  loadInfra,
  memberPath,
  property,
  resourcesOfType,
  stringParts,
  valueOf,
  where,
} from "./bicepTree.js";

/**
 * Private mode keeps every way in narrow: the site's private endpoint answers the cluster's
 * subnets only, the storage account has no public endpoint, and the scm site follows the app's
 * rules in both modes.
 */
interface Context {
  main: BicepFile;
  network: BicepFile;
  storage: BicepFile;
  endpoints: BicepFile;
  app: BicepFile;
}

const privateAccess = suite<Context>("private access");

privateAccess.before(async (context) => {
  context.main = await infraFile("infra/main.bicep");
  context.network = await infraFile("infra/modules/network.bicep");
  context.storage = await infraFile("infra/modules/storage.bicep");
  context.endpoints = await infraFile("infra/modules/storage-endpoints.bicep");
  context.app = await infraFile("infra/modules/function-app.bicep");
});

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

type Rule = { name: string; properties: Record<string, Value> };

function rulesOf(file: BicepFile, nsg: string, bindings: Record<string, Value>): Rule[] {
  const rules = property(bodyOf(declared(file, "resource", nsg)), "properties", "securityRules");
  assert.ok(rules !== undefined, `${nsg} has no rules`);
  return evaluate(file, rules, { bindings }) as unknown as Rule[];
}

/** What a packet from `source` to port 443 meets first, as Azure orders rules: by priority. */
function verdict(rules: readonly Rule[], source: string): string {
  const inbound = rules.filter((rule) => rule.properties["direction"] === "Inbound").sort((a, b) => Number(a.properties["priority"]) - Number(b.properties["priority"]));
  const match = inbound.find((rule) => rule.properties["sourceAddressPrefix"] === source || rule.properties["sourceAddressPrefix"] === "*");
  return String(match?.properties["access"] ?? "default rules");
}

const clusterSubnets = ["10.224.0.0/16", "10.225.0.0/28"];

privateAccess("the site's private endpoint answers HTTPS from the listed cluster subnets only; peered networks are denied", ({ network }) => {
  const bindings = { privateEndpointAllowedSources: clusterSubnets, privateEndpointSubnetPrefix: "10.250.1.0/27", functionSubnetPrefix: "10.250.0.0/24", storageEndpointSubnetPrefix: "10.250.1.32/27" };
  const rules = rulesOf(network, "privateEndpointNsg", bindings);
  const allows = rules.filter((rule) => rule.properties["access"] === "Allow");
  assert.equal(
    allows.map((rule) => [rule.properties["sourceAddressPrefix"], rule.properties["destinationPortRange"], rule.properties["protocol"], rule.properties["destinationAddressPrefix"]]),
    clusterSubnets.map((source) => [source, "443", "Tcp", "10.250.1.0/27"]),
  );
  for (const source of clusterSubnets) assert.is(verdict(rules, source), "Allow", source);
  // A peered VNet, the VirtualNetwork tag the default rules allow, and the internet: all refused
  // by the explicit rule, which comes before Azure's AllowVnetInBound (65000).
  for (const source of ["10.10.0.0/16", "VirtualNetwork", "Internet"]) assert.is(verdict(rules, source), "Deny", source);
  const deny = rules.find((rule) => rule.properties["access"] === "Deny");
  assert.equal(deny?.properties, {
    priority: 4096,
    direction: "Inbound",
    access: "Deny",
    protocol: "*",
    sourceAddressPrefix: "*",
    sourcePortRange: "*",
    destinationAddressPrefix: "*",
    destinationPortRange: "*",
  });
  assert.equal(verdict(rulesOf(network, "privateEndpointNsg", { ...bindings, privateEndpointAllowedSources: [] }), "10.224.0.0/16"), "Deny", "an empty list lets nothing in");
});

privateAccess("NSG rules apply to the endpoints: network policies enabled on both endpoint subnets, each with its NSG", ({ network }) => {
  const [vnet] = resourcesOfType(network, "Microsoft.Network/virtualNetworks");
  assert.ok(vnet !== undefined);
  const subnets = new Map(kids(property(bodyOf(vnet), "properties", "subnets")!).map((subnet) => [property(subnet, "name")?.text, subnet]));
  for (const [subnet, nsg] of [
    ["privateEndpointSubnetName", "privateEndpointNsg"],
    ["storageEndpointSubnetName", "storageEndpointNsg"],
  ] as const) {
    const properties = property(subnets.get(subnet), "properties");
    assert.is(literal(property(properties, "privateEndpointNetworkPolicies")), "Enabled", subnet);
    assert.equal(memberPath(property(properties, "networkSecurityGroup", "id")!), [nsg, "id"], subnet);
  }
});

privateAccess("url wiring admits the API server subnet alone; relay wiring admits the relay's subnets; the deploy runner either way; nothing by default", ({ main }) => {
  const params = property(declared(main, "module", "network").body?.object, "params");
  const sources = property(params, "privateEndpointAllowedSources");
  assert.ok(sources !== undefined);
  const apiServer = ["10.225.0.0/28"];
  const nodesAndPods = ["10.224.0.0/16", "10.226.0.0/16"];
  const given = { apiServerSubnetAddressPrefixes: apiServer, relaySourceAddressPrefixes: nodesAndPods, deployRunnerAddressPrefixes: ["10.30.0.4/32"], networkMode: "private" };
  assert.equal(evaluate(main, sources, { bindings: { ...given, privateWireMode: "url" } }), [...apiServer, "10.30.0.4/32"], "keyless webhooks: the API server only");
  assert.equal(evaluate(main, sources, { bindings: { ...given, privateWireMode: "relay" } }), [...nodesAndPods, "10.30.0.4/32"]);
  assert.is(valueOf(main, "privateWireMode"), "url");
  assert.equal(valueOf(main, "apiServerSubnetAddressPrefixes"), []);
  assert.equal(valueOf(main, "relaySourceAddressPrefixes"), []);
  assert.equal(valueOf(main, "deployRunnerAddressPrefixes"), []);
  assert.not.ok(declarationsOf(main, "param").has("clusterSubnetAddressPrefixes"), "no parameter mixes the API server subnet with the pods' subnets");
});

privateAccess("private mode: the storage account has no public endpoint; public mode keeps it (no VNet to come from)", ({ main, storage }) => {
  const [account] = resourcesOfType(storage, "Microsoft.Storage/storageAccounts");
  assert.ok(account !== undefined);
  const properties = property(bodyOf(account), "properties");
  const scenario = (privateMode: boolean) => ({
    access: evaluate(storage, property(properties, "publicNetworkAccess")!, { bindings: { privateMode } }),
    acls: evaluate(storage, property(properties, "networkAcls")!, { bindings: { privateMode } }),
  });
  assert.equal(scenario(true), { access: "Disabled", acls: { defaultAction: "Deny", bypass: "None" } });
  assert.equal(scenario(false), { access: "Enabled", acls: { defaultAction: "Allow", bypass: "AzureServices" } });
  assert.is(valueOf(storage, "privateMode"), false);
  const params = property(declared(main, "module", "storage").body?.object, "params");
  assert.is(property(params, "privateMode")?.text, "privateMode");
});

privateAccess("private mode: blob and table private endpoints in their own subnet, registered in their zones", ({ main, network, endpoints }) => {
  const module = declared(main, "module", "storageEndpoints");
  assert.is(module.body?.condition?.text, "(privateMode)");
  assert.is(module.target, "modules/storage-endpoints.bicep");
  const params = property(module.body?.object, "params");
  for (const [param, output] of [
    ["subnetId", "storageEndpointSubnetId"],
    ["blobDnsZoneId", "blobDnsZoneId"],
    ["tableDnsZoneId", "tableDnsZoneId"],
  ] as const) {
    assert.is(property(params, param)?.text, `network.?outputs.${output} ?? ''`, param);
  }
  const targets = valueOf(endpoints, "endpoints", { bindings: { blobDnsZoneId: "zone-blob", tableDnsZoneId: "zone-table" } });
  assert.equal(targets, [
    { service: "blob", zoneId: "zone-blob" },
    { service: "table", zoneId: "zone-table" },
  ]);
  const [endpoint] = resourcesOfType(endpoints, "Microsoft.Network/privateEndpoints");
  assert.ok(endpoint !== undefined && endpoint.body?.loop !== undefined);
  const [connection] = kids(property(bodyOf(endpoint), "properties", "privateLinkServiceConnections")!);
  assert.is(property(connection, "properties", "privateLinkServiceId")?.text, "account.id");
  assert.is(property(connection, "properties", "groupIds")?.text.replace(/\s+/g, " "), "[ target.service ]");
  assert.equal(valueOf(network, "storageServices"), ["blob", "table"]);
  const zones = declared(network, "resource", "storageDnsZones");
  assert.equal(
    stringParts(property(bodyOf(zones), "name")!).map((part) => ("text" in part ? part.text : `{${part.expression.text}}`)),
    ["privatelink.", "{service}", ".", "{environment().suffixes.storage}"],
  );
  // Only the function's subnet reaches the storage endpoints.
  const rules = rulesOf(network, "storageEndpointNsg", { functionSubnetPrefix: "10.250.0.0/24", storageEndpointSubnetPrefix: "10.250.1.32/27" });
  assert.is(verdict(rules, "10.250.0.0/24"), "Allow");
  for (const source of ["10.224.0.0/16", "VirtualNetwork"]) assert.is(verdict(rules, source), "Deny", source);
  // The app waits for its storage endpoints.
  assert.ok(property(declared(main, "module", "functionApp").body?.object, "dependsOn")?.text.includes("storageEndpoints"));
});

privateAccess("the scm site follows the app's rules, in both modes", ({ app }) => {
  const [site] = resourcesOfType(app, "Microsoft.Web/sites");
  assert.ok(site !== undefined);
  const siteConfig = property(bodyOf(site), "properties", "siteConfig");
  assert.is(property(siteConfig, "scmIpSecurityRestrictionsUseMain")?.text, "true");
  for (const networkMode of ["public", "private"]) {
    for (const clusterEgressIpAddresses of [[], ["20.1.2.3"]]) {
      const bindings = { networkMode, clusterEgressIpAddresses };
      assert.is(
        evaluate(app, property(siteConfig, "scmIpSecurityRestrictionsDefaultAction")!, { bindings }),
        evaluate(app, property(siteConfig, "ipSecurityRestrictionsDefaultAction")!, { bindings }),
        JSON.stringify(bindings),
      );
    }
  }
  assert.is(property(siteConfig, "scmIpSecurityRestrictions"), undefined, "no separate scm rules");
});

privateAccess("maximumInstanceCount is at least 40, the lowest maximum Flex Consumption documents", ({ main, app }) => {
  for (const file of [main, app]) {
    const param = declared(file, "param", "maximumInstanceCount");
    const minimum = decorator(param, "minValue");
    assert.ok(minimum !== undefined, file.path);
    assert.equal(callArguments(minimum).map((argument) => evaluate(file, argument)), [40], file.path);
    assert.ok(Number(valueOf(file, "maximumInstanceCount")) >= 40);
  }
});

privateAccess("outputs of conditional modules are read with the safe-access form (no BCP318)", async () => {
  let reads = 0;
  for (const file of (await loadInfra()).values()) {
    const conditional = new Set([...declarationsOf(file, "module").values()].filter((module) => module.body?.condition !== undefined).map((module) => module.name));
    for (const access of descendants(file.root, "member_expression")) {
      const path = memberPath(access);
      if (path === undefined || path.length !== 3 || path[1] !== "outputs" || !conditional.has(path[0] ?? "")) continue;
      reads += 1;
      assert.match(access.text, /^[A-Za-z_]\w*(\.\?outputs\.|!\.outputs\.|\.outputs\.\?)/, `${file.path} ${where(access)}: ${access.text}`);
    }
  }
  assert.ok(reads >= 5, `${reads} reads of conditional module outputs`);
});

privateAccess.run();
