import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  type BicepFile,
  declarationsOf,
  declarations,
  declaredSymbols,
  descendants,
  infraFile,
  kids,
  loadBicep,
  loadInfra,
  memberPath,
  parseBicep,
  propertiesOf,
  property,
  symbolUses,
  syntaxProblems,
  where,
} from "./bicepTree.js";

// Outputs of the Azure Verified Modules used, as their pinned versions publish them.
const registryOutputs: Record<string, readonly string[]> = {
  "br/public:avm/res/managed-identity/user-assigned-identity": ["name", "resourceId", "principalId", "clientId", "resourceGroupName", "location"],
  "br/public:avm/res/operational-insights/workspace": ["name", "resourceId", "logAnalyticsWorkspaceId", "resourceGroupName", "location"],
};

const syntax = suite<{ files: Map<string, BicepFile> }>("bicep syntax and symbols", { files: new Map() });

syntax.before(async (context) => {
  context.files = await loadInfra();
});

syntax("infra holds main.bicep and its modules", (context) => {
  assert.ok(context.files.has("infra/main.bicep"));
  assert.ok([...context.files.keys()].filter((path) => path.startsWith("infra/modules/")).length >= 5);
});

syntax("the grammar reports broken Bicep (the syntax check is not vacuous)", async () => {
  const broken = await parseBicep("resource site 'Microsoft.Web/sites@2024-04-01' = {\n  name: 'x'\n  properties: {\n");
  assert.ok(syntaxProblems(broken).length > 0);
  const stray = await parseBicep("param location string = = 'x'\n");
  assert.ok(syntaxProblems(stray).length > 0);
});

syntax("every .bicep file parses with no ERROR or MISSING node", (context) => {
  for (const file of context.files.values()) {
    assert.equal(syntaxProblems(file.root), [], file.path);
  }
});

// The grammar reads a call that opens an array (`[\n resourceGroup().id`) as an identifier
// followed by an empty parenthesis: valid Bicep the checks below would misread.
syntax("no expression is read as an empty parenthesis", (context) => {
  for (const file of context.files.values()) {
    const empty = descendants(file.root, "parenthesized_expression")
      .filter((node) => kids(node).length === 0)
      .map((node) => `empty parenthesis at ${where(node)}`);
    assert.equal(empty, [], file.path);
  }
});

syntax("every identifier in an expression names a declaration or a loop variable", (context) => {
  for (const file of context.files.values()) {
    const known = declaredSymbols(file);
    const unknown = symbolUses(file)
      .filter((use) => !known.has(use.name))
      .map((use) => `${use.name} at ${where(use.node)}`);
    assert.equal(unknown, [], file.path);
  }
});

syntax("no parameter or variable is left unused", (context) => {
  for (const file of context.files.values()) {
    const used = new Set(symbolUses(file).map((use) => use.name));
    const unused = declarations(file)
      .filter((d) => (d.kind === "param" || d.kind === "var") && !used.has(d.name))
      .map((d) => `${d.kind} ${d.name}`);
    assert.equal(unused, [], file.path);
  }
});

// Files that use the Kubernetes extension also declare Kubernetes objects: group/Kind@version.
const kubernetesResourceType = /^[a-z0-9.]+\/[A-Z][A-Za-z]+@v\d+((alpha|beta)\d+)?$/;

syntax("every resource names a type and a dated API version (or a Kubernetes kind and version)", (context) => {
  for (const file of context.files.values()) {
    const kubernetes = /^extension\s+kubernetes\b/m.test(file.source);
    for (const resource of declarationsOf(file, "resource").values()) {
      const target = resource.target ?? "";
      if (kubernetes && kubernetesResourceType.test(target)) continue;
      assert.match(target, /^Microsoft\.[A-Za-z]+\/[A-Za-z/]+@\d{4}-\d{2}-\d{2}(-preview)?$/, `${file.path} ${resource.name}`);
    }
  }
});

syntax("registry modules are Azure Verified Modules pinned to a version", (context) => {
  let registryModules = 0;
  for (const file of context.files.values()) {
    for (const module of declarationsOf(file, "module").values()) {
      const target = module.target ?? "";
      if (!target.startsWith("br")) continue;
      registryModules += 1;
      assert.match(target, /^br\/public:avm\/(res|ptn|utl)\/[a-z0-9-]+\/[a-z0-9-]+:\d+\.\d+\.\d+$/, `${file.path} ${module.name}`);
    }
  }
  assert.ok(registryModules >= 1, "no Azure Verified Module used");
});

syntax("local modules exist, get every required parameter and only declared ones", async (context) => {
  for (const file of context.files.values()) {
    for (const module of declarationsOf(file, "module").values()) {
      const target = module.target ?? "";
      if (target.startsWith("br")) continue;
      const modulePath = join(dirname(file.absolutePath), target);
      assert.ok(existsSync(modulePath), `${file.path}: ${target} does not exist`);
      const moduleFile = await loadBicep(modulePath);
      const moduleParams = declarationsOf(moduleFile, "param");
      const passedNode = property(module.body?.object, "params");
      const passed = passedNode === undefined ? new Set<string>() : new Set(propertiesOf(passedNode).keys());
      for (const name of passed) assert.ok(moduleParams.has(name), `${file.path} passes ${name}, which ${target} does not declare`);
      for (const param of moduleParams.values()) {
        if (param.value === undefined) assert.ok(passed.has(param.name), `${file.path} leaves ${target} param ${param.name} unset`);
      }
    }
  }
});

syntax("every module output a file reads is an output of that module", async (context) => {
  for (const file of context.files.values()) {
    const modules = declarationsOf(file, "module");
    for (const access of descendants(file.root, "member_expression")) {
      const path = memberPath(access);
      if (path === undefined || path.length !== 3 || path[1] !== "outputs") continue;
      const [symbol, , output] = path;
      const module = modules.get(symbol ?? "");
      if (module === undefined || output === undefined) continue;
      const target = module.target ?? "";
      if (target.startsWith("br")) {
        const known = registryOutputs[target.replace(/:[^:]+$/, "")];
        assert.ok(known?.includes(output), `${file.path}: ${symbol}.outputs.${output} is not a known output of ${target}`);
      } else {
        const moduleFile = await loadBicep(join(dirname(file.absolutePath), target));
        assert.ok(declarationsOf(moduleFile, "output").has(output), `${file.path}: ${target} has no output ${output}`);
      }
    }
  }
});

syntax("main.bicep deploys to a resource group and names no region", async () => {
  const main = await infraFile("infra/main.bicep");
  const scope = kids(main.root).find((node) => node.type === "target_scope_assignment");
  assert.ok(scope !== undefined);
  assert.is(scope.text.replace(/\s+/g, " "), "targetScope = 'resourceGroup'");
  const location = declarationsOf(main, "param").get("location");
  assert.is(location?.value?.text, "resourceGroup().location");
  assert.not.ok(location?.decorators.some((call) => call.text.startsWith("allowed")), "no region list on location");
});

syntax.run();
