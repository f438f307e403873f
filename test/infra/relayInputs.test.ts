import { suite } from "uvu";
import * as assert from "uvu/assert";
import { type BicepFile, type Declaration, callArguments, declarationsOf, declared, decorator, evaluate, infraFile, property, type Value } from "./bicepTree.js";

/**
 * A relay wired by the deployment without its function key or TLS key installs a relay that
 * refuses every GMSA pod (`x-functions-key ""`) or never starts (an empty key for nginx). The
 * deployment refuses it instead: modules/relay-wiring-inputs.bicep takes every relay input with
 * @minLength(1), main deploys it wherever it wires relay mode, and the wiring waits on it.
 */
interface Context {
  main: BicepFile;
  inputs: BicepFile;
}

const Inputs = suite<Context>("relay wiring inputs");

Inputs.before(async (context) => {
  context.main = await infraFile("infra/main.bicep");
  context.inputs = await infraFile("infra/modules/relay-wiring-inputs.bicep");
});

/** The parameters of the inputs module a deployment would refuse, given what main passes it. */
function refused(inputs: BicepFile, passed: Record<string, Value>): string[] {
  return [...declarationsOf(inputs, "param").values()].flatMap((param: Declaration) => {
    const minLength = decorator(param, "minLength");
    if (minLength === undefined) return [];
    const least = Number(evaluate(inputs, callArguments(minLength)[0]!));
    const value = passed[param.name];
    return typeof value === "string" && value.length >= least ? [] : [param.name];
  });
}

function passedBy(main: BicepFile, module: Declaration, bindings: Record<string, Value>): Record<string, Value> {
  const params = property(module.body!.object, "params")!;
  const names = ["wiredCluster", "relayFunctionKey", "relayCaCertificate", "relayTlsCertificate", "relayTlsKey"];
  return Object.fromEntries(names.map((name) => [name, evaluate(main, property(params, name)!, { bindings })]));
}

const pem = (what: string) => `-----BEGIN ${what}-----\nMIIB\n-----END ${what}-----\n`;

Inputs("every relay input is required, and the secret ones are secure", ({ inputs }) => {
  for (const name of ["relayFunctionKey", "relayCaCertificate", "relayTlsCertificate", "relayTlsKey"]) {
    const param = declared(inputs, "param", name);
    assert.ok(decorator(param, "minLength"), `${name} has @minLength`);
  }
  for (const name of ["relayFunctionKey", "relayTlsKey"]) assert.ok(decorator(declared(inputs, "param", name), "secure"), `${name} is @secure`);
  assert.equal(declarationsOf(inputs, "resource").size, 0, "it deploys nothing");
});

Inputs("the single cluster: relay wiring without the function key or the TLS key is refused before the wiring; url wiring and no wiring are not checked", ({ main, inputs }) => {
  const module = declared(main, "module", "relayInputs");
  const wiring = declared(main, "module", "clusterWiring");
  assert.ok(wiring.body!.object.text.includes("relayInputs"), "the wiring waits on the check");
  const full = { relayFunctionKey: "k3y", relayCaCertificate: pem("CERTIFICATE"), relayTlsCertificate: pem("CERTIFICATE"), relayTlsKey: pem("PRIVATE KEY") };
  const relay = { wireCluster: true, hasCluster: true, networkMode: "public" };
  assert.is(evaluate(main, module.body!.condition!, { bindings: relay }), true);
  assert.equal(refused(inputs, passedBy(main, module, { ...relay, ...full })), []);
  // What the workflow and main.parameters.json pass today: neither the key nor the TLS key.
  assert.equal(refused(inputs, passedBy(main, module, { ...relay, ...full, relayFunctionKey: "", relayTlsKey: "" })), ["relayFunctionKey", "relayTlsKey"]);
  assert.is(evaluate(main, module.body!.condition!, { bindings: { ...relay, networkMode: "private", privateWireMode: "url" } }), false, "url wiring has no relay");
  assert.is(evaluate(main, module.body!.condition!, { bindings: { ...relay, wireCluster: false } }), false, "not wired by the deployment");
});

Inputs("fleet members wired here in relay mode need their own TLS key; members left to npm run wire are not checked", ({ main, inputs }) => {
  const module = declared(main, "module", "memberRelayInputs");
  const wiring = declared(main, "module", "memberWiring");
  assert.ok(wiring.body!.object.text.includes("memberRelayInputs"), "the members' wiring waits on the check");
  const wired = { name: "alpha", aksResourceId: "/subscriptions/1/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks", wire: { relayCaCertificate: pem("CERTIFICATE"), relayTlsCertificate: pem("CERTIFICATE") } };
  const base = { index: 0, networkMode: "public", relayFunctionKey: "k3y", resourceToken: "abc" };
  assert.is(evaluate(main, module.body!.condition!, { bindings: { ...base, member: wired } }), true);
  assert.is(evaluate(main, module.body!.condition!, { bindings: { ...base, member: { name: "beta", aksResourceId: wired.aksResourceId } } }), false, "no wire: wired by npm run wire");
  assert.equal(refused(inputs, passedBy(main, module, { ...base, member: wired, clusterRelayTlsKeys: { alpha: pem("PRIVATE KEY") } })), []);
  assert.equal(refused(inputs, passedBy(main, module, { ...base, member: wired, clusterRelayTlsKeys: {} })), ["relayTlsKey"]);
  assert.equal(refused(inputs, passedBy(main, module, { ...base, member: wired, relayFunctionKey: "", clusterRelayTlsKeys: { alpha: pem("PRIVATE KEY") } })), ["relayFunctionKey"]);
});

Inputs("every per-member deployment name fits ARM's 64 characters, for the longest member name", ({ main }) => {
  const longest = "m".repeat(63);
  for (const name of ["memberAccess", "memberRelayInputs", "memberWiring"]) {
    const module = declared(main, "module", name);
    const deployment = evaluate(main, property(module.body!.object, "name")!, { bindings: { member: { name: longest }, resourceToken: "abc" } });
    assert.type(deployment, "string");
    assert.ok((deployment as string).length <= 64, `${name}: ${(deployment as string).length} characters`);
  }
});

Inputs.run();
