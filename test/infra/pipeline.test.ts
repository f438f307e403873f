import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import {
  declarations,
  declarationsOf,
  infraFile,
  literal,
  property,
  repoRoot,
  resourcesOfType,
} from "./bicepTree.js";

interface Step {
  name?: string;
  id?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
  "continue-on-error"?: boolean;
}

interface Job {
  needs?: string | string[];
  "runs-on"?: string;
  steps: Step[];
}

interface Workflow {
  on: Record<string, unknown>;
  permissions: Record<string, string>;
  jobs: Record<string, Job>;
}

function readYaml(path: string): unknown {
  return parse(readFileSync(join(repoRoot, path), "utf8"));
}

const workflow = readYaml(".github/workflows/deploy.yml") as Workflow;
const allSteps = Object.entries(workflow.jobs).flatMap(([job, { steps }]) => steps.map((step) => ({ job, step })));

function stepIndex(predicate: (step: Step) => boolean, what: string): { job: string; index: number; step: Step } {
  for (const [job, { steps }] of Object.entries(workflow.jobs)) {
    const index = steps.findIndex(predicate);
    const step = steps[index];
    if (step !== undefined) return { job, index, step };
  }
  throw new Error(`no step ${what}`);
}

/** Jobs a job depends on, directly or through others. */
function upstream(job: string): Set<string> {
  const found = new Set<string>();
  const visit = (name: string): void => {
    const needs = workflow.jobs[name]?.needs ?? [];
    for (const need of Array.isArray(needs) ? needs : [needs]) {
      if (!found.has(need)) {
        found.add(need);
        visit(need);
      }
    }
  };
  visit(job);
  return found;
}

/** True when step a runs before step b (same job, or a's job is upstream of b's). */
function runsBefore(a: { job: string; index: number }, b: { job: string; index: number }): boolean {
  return a.job === b.job ? a.index < b.index : upstream(b.job).has(a.job);
}

const pipeline = suite("deploy workflow");

pipeline("runs on pushes to main and by hand, with OIDC token and read-only contents", () => {
  assert.equal(Object.keys(workflow.on).sort(), ["push", "workflow_dispatch"]);
  assert.equal((workflow.on["push"] as { branches: string[] }).branches, ["main"]);
  assert.equal(workflow.permissions, { "id-token": "write", contents: "read" });
});

pipeline("installs with npm ci, tests with npm test, packages with npm run package", () => {
  const install = stepIndex((step) => step.run?.trim() === "npm ci", "npm ci");
  const test = stepIndex((step) => step.run?.trim() === "npm test", "npm test");
  const pack = stepIndex((step) => step.run?.trim() === "npm run package", "npm run package");
  assert.ok(runsBefore(install, test) && runsBefore(test, pack));
  const upload = stepIndex((step) => step.uses?.startsWith("actions/upload-artifact@") ?? false, "upload");
  assert.is(upload.step.with?.["path"], "dist/package.zip");
});

pipeline("signs in to Azure with OIDC from repository variables, never a stored secret", () => {
  const login = stepIndex((step) => step.uses?.startsWith("azure/login@") ?? false, "azure/login");
  assert.equal(login.step.with, {
    "client-id": "${{ vars.AZURE_CLIENT_ID }}",
    "tenant-id": "${{ vars.AZURE_TENANT_ID }}",
    "subscription-id": "${{ vars.AZURE_SUBSCRIPTION_ID }}",
  });
  const text = readFileSync(join(repoRoot, ".github/workflows/deploy.yml"), "utf8");
  assert.not.match(text, /secrets\./);
  assert.not.match(text, /publish-profile|creds:/);
});

pipeline("what-if runs before create, both on infra/main.bicep with the same parameters", () => {
  const whatIf = stepIndex((step) => /az deployment group what-if/.test(step.run ?? ""), "what-if");
  const create = stepIndex((step) => /az deployment group create/.test(step.run ?? ""), "create");
  const login = stepIndex((step) => step.uses?.startsWith("azure/login@") ?? false, "azure/login");
  assert.ok(runsBefore(login, whatIf) && runsBefore(whatIf, create));
  for (const { step } of [whatIf, create]) {
    assert.match(step.run ?? "", /--template-file infra\/main\.bicep/);
    assert.match(step.run ?? "", /--parameters @deploy\.parameters\.json/);
  }
});

pipeline("tests pass before anything is deployed", () => {
  const test = stepIndex((step) => step.run?.trim() === "npm test", "npm test");
  const deploySteps = allSteps.filter(({ step }) => /az deployment group|functions-action|npm run wire/.test(`${step.run ?? ""}${step.uses ?? ""}`));
  assert.ok(deploySteps.length >= 4);
  for (const { job, step } of deploySteps) {
    const index = workflow.jobs[job]?.steps.indexOf(step) ?? -1;
    assert.ok(runsBefore(test, { job, index }), `${step.name} may run before the tests`);
  }
});

pipeline("the package goes to the Flex Consumption app the deployment created", () => {
  const create = stepIndex((step) => /az deployment group create/.test(step.run ?? ""), "create");
  const deploys = allSteps.filter(({ step }) => step.uses?.startsWith("Azure/functions-action@"));
  assert.ok(deploys.length >= 1);
  for (const { job, step } of deploys) {
    assert.is(step.with?.["sku"], "flexconsumption");
    assert.is(step.with?.["package"], "dist/package.zip");
    assert.is(step.with?.["app-name"], "${{ steps.infra.outputs.app-name }}");
    assert.ok(runsBefore(create, { job, index: workflow.jobs[job]?.steps.indexOf(step) ?? -1 }));
  }
  assert.is(create.step.id, "infra");
});

pipeline("the cluster is wired with kubelogin (azurecli) and the wire command", () => {
  const wire = stepIndex((step) => /npm run wire/.test(step.run ?? ""), "wire");
  const run = wire.step.run ?? "";
  assert.match(run, /az aks get-credentials/);
  assert.match(run, /kubelogin convert-kubeconfig -l azurecli/);
  assert.match(run, /npm run wire -- --function-url "\$BASE_URL" --mode "\$WIRE_MODE" --identity "\$PRINCIPAL_ID" --apply/);
  assert.ok(run.indexOf("get-credentials") < run.indexOf("kubelogin") && run.indexOf("kubelogin") < run.indexOf("npm run wire"));
  const kubelogin = stepIndex((step) => step.uses?.startsWith("azure/use-kubelogin@") ?? false, "use-kubelogin");
  assert.ok(runsBefore(kubelogin, wire));
  assert.is(wire.step.env?.["PRINCIPAL_ID"], "${{ steps.infra.outputs.principal-id }}");
  assert.is(wire.step.env?.["WIRE_MODE"], "${{ steps.infra.outputs.wire-mode }}");
});

pipeline("a smoke test expects 200 from GET https://<host>/health after the deployment", () => {
  const smoke = stepIndex((step) => /\/health/.test(JSON.stringify(step.env ?? {})) && /curl/.test(step.run ?? ""), "smoke test");
  assert.is(smoke.step.env?.["HEALTH_URL"], "https://${{ steps.infra.outputs.host }}/health");
  assert.match(smoke.step.run ?? "", /"\$status" = "200"/);
  assert.match(smoke.step.run ?? "", /exit 1/);
  const deploy = stepIndex((step) => step.uses?.startsWith("Azure/functions-action@") ?? false, "package deployment");
  assert.ok(runsBefore(deploy, smoke));
});

pipeline("every output the workflow reads is an output of main.bicep", async () => {
  const main = await infraFile("infra/main.bicep");
  const outputs = new Set(declarationsOf(main, "output").keys());
  const read = allSteps.flatMap(({ step }) => [...(step.run ?? "").matchAll(/jq -r \.([A-Z_]+)\.value/g)].map((match) => match[1]));
  assert.ok(read.length >= 5);
  for (const name of read) assert.ok(name !== undefined && outputs.has(name), `main.bicep has no output ${name}`);
});

pipeline("every deployment parameter the workflow writes is a parameter of main.bicep", async () => {
  const main = await infraFile("infra/main.bicep");
  const params = declarationsOf(main, "param");
  const write = stepIndex((step) => /deploy\.parameters\.json/.test(step.run ?? "") && /jq -n/.test(step.run ?? ""), "parameters");
  const names = [...(write.step.run ?? "").matchAll(/--arg(?:json)? (\w+)/g)].map((match) => match[1]);
  assert.ok(names.includes("environmentName"));
  for (const name of names) assert.ok(name !== undefined && params.has(name), `main.bicep has no parameter ${name}`);
});

const packaging = suite("azd packaging");

packaging("azure.yaml: one function service in TypeScript from the project root, infra in infra/", () => {
  const azure = readYaml("azure.yaml") as {
    infra: { provider: string; path: string; module: string };
    services: Record<string, { project: string; language: string; host: string }>;
  };
  assert.equal(azure.infra, { provider: "bicep", path: "infra", module: "main" });
  const services = Object.entries(azure.services);
  assert.is(services.length, 1);
  const [name, service] = services[0]!;
  assert.equal(service, { project: ".", language: "ts", host: "function" });
  assert.match(name, /^[a-z][a-z0-9-]*$/);
});

packaging("the function app carries the azd-service-name tag of that service", async () => {
  const azure = readYaml("azure.yaml") as { services: Record<string, unknown> };
  const [service] = Object.keys(azure.services);
  const app = await infraFile("infra/modules/function-app.bicep");
  const [site] = resourcesOfType(app, "Microsoft.Web/sites");
  const tags = property(site?.body?.object, "tags");
  assert.ok(tags?.text.includes(`'azd-service-name': '${service}'`));
});

packaging("main.parameters.json sets only main.bicep parameters, from azd variables", async () => {
  const main = await infraFile("infra/main.bicep");
  const params = declarationsOf(main, "param");
  const file = JSON.parse(readFileSync(join(repoRoot, "infra/main.parameters.json"), "utf8")) as {
    parameters: Record<string, { value: unknown }>;
  };
  for (const name of Object.keys(file.parameters)) assert.ok(params.has(name), `main.bicep has no parameter ${name}`);
  assert.is(file.parameters["environmentName"]?.value, "${AZURE_ENV_NAME}");
  assert.is(file.parameters["location"]?.value, "${AZURE_LOCATION}");
  const required = declarations(main).filter((d) => d.kind === "param" && d.value === undefined).map((d) => d.name);
  for (const name of required) assert.ok(name in file.parameters, `required parameter ${name} is not set`);
  for (const [name, { value }] of Object.entries(file.parameters)) {
    assert.match(String(value), /^\$\{[A-Z_]+(=[^}]*)?\}$/, `${name} is not an azd variable`);
  }
});

packaging("main.bicep outputs what the pipeline needs", async () => {
  const main = await infraFile("infra/main.bicep");
  const outputs = declarationsOf(main, "output");
  for (const name of [
    "FUNCTION_HOST_NAME",
    "FUNCTION_APP_NAME",
    "IDENTITY_CLIENT_ID",
    "IDENTITY_PRINCIPAL_ID",
    "WEBHOOK_BASE_URL",
    "AZURE_RESOURCE_GROUP",
  ]) {
    assert.ok(outputs.has(name), `no output ${name}`);
  }
  const baseUrl = outputs.get("WEBHOOK_BASE_URL")?.value;
  assert.is(literal(baseUrl), undefined, "the base URL is built from the host name");
  assert.ok(baseUrl?.text.startsWith("'https://${"));
});

pipeline.run();
packaging.run();
