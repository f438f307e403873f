import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  type BicepFile,
  type Declaration,
  declarations,
  declarationsOf,
  declared,
  callArguments,
  decorator,
  evaluate,
  infraFile,
  kids,
  literal,
  property,
  resourcesOfType,
  valueOf,
} from "./bicepTree.js";

interface Context {
  main: BicepFile;
  app: BicepFile;
  network: BicepFile;
}

const network = suite<Context>("network modes");

network.before(async (context) => {
  context.main = await infraFile("infra/main.bicep");
  context.app = await infraFile("infra/modules/function-app.bicep");
  context.network = await infraFile("infra/modules/network.bicep");
});

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

function site(app: BicepFile): Declaration {
  const [found] = resourcesOfType(app, "Microsoft.Web/sites");
  if (found === undefined) throw new Error("no site");
  return found;
}

network("networkMode allows exactly public and private, public by default", ({ main }) => {
  const mode = declared(main, "param", "networkMode");
  const allowed = decorator(mode, "allowed");
  assert.ok(allowed !== undefined);
  assert.equal(callArguments(allowed).map((argument) => evaluate(main, argument)), [["public", "private"]]);
  assert.is(valueOf(main, "networkMode"), "public");
});

network("public mode: public access, allow-list of the cluster's egress, deny the rest when listed; private: none", ({ app }) => {
  const properties = property(bodyOf(site(app)), "properties");
  const siteConfig = property(properties, "siteConfig");
  const access = property(properties, "publicNetworkAccess")!;
  const rules = property(siteConfig, "ipSecurityRestrictions")!;
  const defaultAction = property(siteConfig, "ipSecurityRestrictionsDefaultAction")!;
  const scenario = (networkMode: string, clusterEgressIpAddresses: string[]) => {
    const bindings = { networkMode, clusterEgressIpAddresses };
    return {
      access: evaluate(app, access, { bindings }),
      defaultAction: evaluate(app, defaultAction, { bindings }),
      allowed: (evaluate(app, rules, { bindings }) as readonly Record<string, unknown>[]).map((rule) => rule["ipAddress"]),
    };
  };
  assert.equal(scenario("public", ["20.1.2.3", "20.9.0.0/28"]), {
    access: "Enabled",
    defaultAction: "Deny",
    allowed: ["20.1.2.3/32", "20.9.0.0/28"],
  });
  assert.equal(scenario("public", []), { access: "Enabled", defaultAction: "Allow", allowed: [] });
  assert.equal(scenario("private", ["20.1.2.3"]), { access: "Disabled", defaultAction: "Allow", allowed: [] });
  // The loop body turns a bare address into a /32 rule that allows it.
  assert.is(rules.type, "for_statement", "ipSecurityRestrictions is built by a loop over the addresses");
  const loop = rules;
  const body = loop.childForFieldName("body")!;
  const rule = (address: string, index: number) =>
    evaluate(app, body, { bindings: { address, index, networkMode: "public", clusterEgressIpAddresses: [address] } });
  assert.equal(rule("20.1.2.3", 0), {
    name: "cluster-egress-0",
    description: "Egress of the AKS cluster (relay)",
    ipAddress: "20.1.2.3/32",
    action: "Allow",
    priority: 100,
  });
  assert.is((rule("20.9.0.0/28", 1) as Record<string, unknown>)["priority"], 101);
});

network("private mode: public access disabled, no allow-list, VNet integration subnet", ({ app }) => {
  const properties = property(bodyOf(site(app)), "properties");
  const bindings = { networkMode: "private", clusterEgressIpAddresses: ["20.1.2.3"], functionSubnetId: "/subnets/fn" };
  assert.is(evaluate(app, property(properties, "publicNetworkAccess")!, { bindings }), "Disabled");
  assert.is(evaluate(app, property(properties, "virtualNetworkSubnetId")!, { bindings }), "/subnets/fn");
  assert.is(valueOf(app, "restrictInbound", { bindings }), false);
  assert.is(evaluate(app, property(properties, "virtualNetworkSubnetId")!, { bindings: { networkMode: "public" } }), null);
});

network("private mode: a private endpoint for the site (group 'sites') registered in the private DNS zone", ({ app }) => {
  const [endpoint] = resourcesOfType(app, "Microsoft.Network/privateEndpoints");
  assert.ok(endpoint !== undefined);
  assert.is(endpoint.body?.condition?.text, "(privateMode)");
  const [connection] = kids(property(bodyOf(endpoint), "properties", "privateLinkServiceConnections")!);
  assert.ok(connection !== undefined);
  assert.is(property(connection, "properties", "privateLinkServiceId")?.text, "site.id");
  assert.equal(evaluate(app, property(connection, "properties", "groupIds")!), ["sites"]);
  assert.is(property(bodyOf(endpoint), "properties", "subnet", "id")?.text, "privateEndpointSubnetId");
  const [zoneGroup] = resourcesOfType(app, "Microsoft.Network/privateEndpoints/privateDnsZoneGroups");
  assert.ok(zoneGroup !== undefined);
  assert.is(zoneGroup.body?.condition?.text, "(privateMode)");
  assert.is(property(bodyOf(zoneGroup), "parent")?.text, "privateEndpoint");
});

network("private mode: the network module is deployed only in private mode and feeds the site", ({ main }) => {
  const module = declared(main, "module", "network");
  assert.is(module.body?.condition?.text, "(privateMode)");
  assert.is(valueOf(main, "privateMode", { bindings: { networkMode: "private" } }), true);
  assert.is(valueOf(main, "privateMode", { bindings: { networkMode: "public" } }), false);
  const params = property(declared(main, "module", "functionApp").body?.object, "params");
  for (const name of ["functionSubnetId", "privateEndpointSubnetId", "privateDnsZoneId"]) {
    assert.is(property(params, name)?.text, `network.?outputs.${name} ?? ''`, name);
  }
});

network("the function subnet is delegated to Microsoft.App/environments; endpoints have their own subnet", ({ network }) => {
  const [vnet] = resourcesOfType(network, "Microsoft.Network/virtualNetworks");
  assert.ok(vnet !== undefined);
  const subnets = kids(property(bodyOf(vnet), "properties", "subnets")!);
  assert.is(subnets.length, 3);
  const delegated = subnets.filter((subnet) => {
    const delegations = property(subnet, "properties", "delegations");
    return delegations !== undefined && kids(delegations).some((entry) => literal(property(entry, "properties", "serviceName")) === "Microsoft.App/environments");
  });
  assert.equal(delegated.map((subnet) => property(subnet, "name")?.text), ["functionSubnetName"]);
  const endpoints = subnets.filter((subnet) => property(subnet, "properties", "privateEndpointNetworkPolicies") !== undefined);
  assert.equal(endpoints.map((subnet) => property(subnet, "name")?.text), ["privateEndpointSubnetName", "storageEndpointSubnetName"]);
});

network("the private DNS zone is privatelink.azurewebsites.net, linked to the function VNet and the cluster VNet", ({ network }) => {
  const zone = declared(network, "resource", "sitesDnsZone");
  assert.is(literal(property(bodyOf(zone), "name")), "privatelink.azurewebsites.net");
  const links = resourcesOfType(network, "Microsoft.Network/privateDnsZones/virtualNetworkLinks").filter(
    (link) => property(bodyOf(link), "parent")?.text === "sitesDnsZone",
  );
  assert.is(links.length, 2);
  const targets = links.map((link) => property(bodyOf(link), "properties", "virtualNetwork", "id")?.text);
  assert.equal(targets.sort(), ["clusterVnetResourceId", "vnet.id"]);
  const clusterLink = links.find((link) => property(bodyOf(link), "properties", "virtualNetwork", "id")?.text === "clusterVnetResourceId");
  assert.is(clusterLink?.body?.condition?.text, "(ownSitesZone && hasClusterVnet)");
  assert.is(valueOf(network, "hasClusterVnet", { bindings: { clusterVnetResourceId: "" } }), false);
});

network("with an existing zone (a hub's, already resolving for the cluster VNet), the endpoint registers there and nothing of this deployment's is linked", ({ network }) => {
  const hubZone = "/subscriptions/2222/resourceGroups/rg-hub-dns/providers/Microsoft.Network/privateDnsZones/privatelink.azurewebsites.net";
  for (const name of ["sitesDnsZone", "functionVnetLink", "clusterVnetLink"]) {
    const condition = declared(network, "resource", name).body?.condition;
    assert.ok(condition !== undefined, `${name} is conditional`);
    const bindings = { existingSitesDnsZoneId: hubZone, clusterVnetResourceId: "/subscriptions/1/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/aks-vnet" };
    assert.is(evaluate(network, condition, { bindings }), false, `${name} is left out`);
    assert.is(evaluate(network, condition, { bindings: { ...bindings, existingSitesDnsZoneId: "" } }), true, `${name} is made without one`);
  }
  const output = declarationsOf(network, "output").get("privateDnsZoneId")!;
  assert.ok(output.value!.text.includes("existingSitesDnsZoneId"), "the endpoint's zone group gets the existing zone");
});

network("the function VNet and the cluster VNet are peered both ways when asked", ({ network }) => {
  const [peering] = resourcesOfType(network, "Microsoft.Network/virtualNetworks/virtualNetworkPeerings");
  assert.ok(peering !== undefined);
  assert.is(peering.body?.condition?.text, "(hasClusterVnet && peerWithClusterVnet)");
  const back = declared(network, "module", "peeringFromCluster");
  assert.is(back.body?.condition?.text, "(hasClusterVnet && peerWithClusterVnet)");
  assert.is(back.target, "vnet-peering.bicep");
});

network("each mode tells the wiring step how the API server reaches the webhooks", ({ main }) => {
  const output = declarations(main).find((d) => d.kind === "output" && d.name === "WIRE_MODE");
  assert.ok(output?.value !== undefined);
  assert.is(evaluate(main, output.value, { bindings: { networkMode: "public", privateWireMode: "url" } }), "relay");
  assert.is(evaluate(main, output.value, { bindings: { networkMode: "private", privateWireMode: "url" } }), "url");
  assert.is(evaluate(main, output.value, { bindings: { networkMode: "private", privateWireMode: "relay" } }), "relay");
});

network.run();
