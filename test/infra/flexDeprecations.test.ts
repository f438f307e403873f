import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { Node } from "web-tree-sitter";
import { type BicepFile, descendants, literal, loadInfra, propertiesOf, property, propertyKey, repoRoot, resourcesOfType } from "./bicepTree.js";
import { flexDeprecatedAppSettings, flexDeprecatedSiteProperties } from "./flexDeprecations.js";

/**
 * Nothing the deployment writes to the Function App is on Flex Consumption's list of what it does
 * not take: a site configuration property on it fails the whole deployment with a 400, an app
 * setting on it is ignored at best. The list is data (flexDeprecations.ts), so a property Flex
 * rejects cannot come back unnoticed, in the Bicep or in the workflow's CLI calls.
 */
interface Context {
  files: Map<string, BicepFile>;
}

const Flex = suite<Context>("Flex Consumption deprecations");

Flex.before(async (context) => {
  context.files = await loadInfra();
});

const lower = (names: readonly string[]) => new Set(names.map((name) => name.toLowerCase()));
const deprecatedProperties = lower(flexDeprecatedSiteProperties);
const deprecatedSettings = lower(flexDeprecatedAppSettings);

/** Every key written in an object literal at or under a node. */
function keysUnder(node: Node): string[] {
  return descendants(node, "object_property").flatMap((entry) => {
    try {
      return [propertyKey(entry)];
    } catch {
      return [];
    }
  });
}

/** The resources of a type, with the `name:` each gives (sites/config has several). */
function resources(file: BicepFile, type: string): Array<{ name: string | undefined; body: Node }> {
  return resourcesOfType(file, type).flatMap((resource) => (resource.body === undefined ? [] : [{ name: literal(property(resource.body.object, "name")), body: resource.body.object }]));
}

Flex("the table is as the reference lists it: the properties Flex refused in the field are on it", () => {
  for (const name of ["ftpsState", "use32BitWorkerProcess", "preWarmedInstanceCount", "netFrameworkVersion", "vnetRouteAllEnabled"]) assert.ok(deprecatedProperties.has(name.toLowerCase()), name);
  for (const name of ["FUNCTIONS_WORKER_RUNTIME", "WEBSITE_RUN_FROM_PACKAGE", "SCM_DO_BUILD_DURING_DEPLOYMENT"]) assert.ok(deprecatedSettings.has(name.toLowerCase()), name);
});

Flex("no site, and no site configuration written on its own, carries a property Flex does not take", ({ files }) => {
  const found: string[] = [];
  for (const [path, file] of files) {
    for (const { body } of resources(file, "Microsoft.Web/sites")) {
      const properties = property(body, "properties");
      if (properties === undefined) continue;
      for (const key of [...propertiesOf(properties).keys(), ...[...propertiesOf(property(properties, "siteConfig") ?? properties).keys()]]) {
        if (deprecatedProperties.has(key.toLowerCase())) found.push(`${path}: ${key}`);
      }
    }
    for (const { name, body } of resources(file, "Microsoft.Web/sites/config")) {
      if (name !== "web") continue;
      for (const key of keysUnder(body)) if (deprecatedProperties.has(key.toLowerCase())) found.push(`${path}: config/web ${key}`);
    }
  }
  assert.equal(found, []);
});

Flex("no app setting is one Flex does not take", ({ files }) => {
  const found: string[] = [];
  let settings = 0;
  for (const [path, file] of files) {
    for (const { name, body } of resources(file, "Microsoft.Web/sites/config")) {
      if (name !== "appsettings") continue;
      for (const key of keysUnder(body)) {
        settings += 1;
        if (deprecatedSettings.has(key.toLowerCase())) found.push(`${path}: ${key}`);
      }
    }
  }
  assert.ok(settings > 10, `the app settings were found (${settings})`);
  assert.equal(found, []);
});

Flex("the scripts never rewrite the whole site configuration, which Flex refuses (the access-restriction and config set commands do)", () => {
  for (const file of [".github/workflows/deploy.yml", "scripts/wire-deployed.sh", "scripts/runner-access.sh"]) {
    const text = readFileSync(join(repoRoot, file), "utf8");
    assert.not.match(text, /az (functionapp|webapp) config (access-restriction|set)\b/, file);
    assert.not.match(text, /az (functionapp|webapp) config appsettings set[^\n]*(FUNCTIONS_WORKER_RUNTIME|WEBSITE_RUN_FROM_PACKAGE)/, file);
  }
});

Flex.run();
