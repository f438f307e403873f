import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { repoRoot } from "./bicepTree.js";

/**
 * scripts/wire-deployed.sh, which the workflow and azd's postdeploy hook run: the one cluster, or
 * every member without `wire`, is wired with its own kubeconfig (a member with its own secret) and
 * then checked, and no secret reaches the output.
 * az, kubelogin and npm are fakes on PATH that record what they were asked, and what the wiring
 * command would have read (its kubeconfig, its secret file, the function key file).
 */
const script = join(repoRoot, "scripts", "wire-deployed.sh");

interface Call {
  readonly command: string;
  readonly args: readonly string[];
  readonly kubeconfig: string;
  readonly secretFile?: string;
  readonly functionKeyFile?: string;
}

interface Run {
  readonly status: number | null;
  readonly output: string;
  readonly calls: readonly Call[];
}

function fakes(dir: string, failFor = ""): string {
  const bin = join(dir, "bin");
  spawnSync("mkdir", ["-p", bin]);
  const log = join(dir, "calls.jsonl");
  // Each fake appends one JSON line: its name, its arguments, and what the files it is handed hold.
  const recorder = (name: string, extra = "") => `#!/usr/bin/env bash
set -eu
file_after() { local want="$1"; shift; while [ $# -gt 0 ]; do if [ "$1" = "$want" ]; then cat "$2"; return; fi; shift; done; }
secret="$(file_after --cluster-secret-file "$@")"
key="$(file_after --function-key-file "$@")"
jq -cn --arg command ${name} --arg kubeconfig "\${KUBECONFIG:-}" --arg secret "$secret" --arg key "$key" '$ARGS.positional as $args | {command: $command, args: $args, kubeconfig: $kubeconfig} + (if $secret == "" then {} else {secretFile: $secret} end) + (if $key == "" then {} else {functionKeyFile: $key} end)' --args -- "$@" >> ${log}
${extra}
`;
  writeFileSync(join(bin, "az"), recorder("az", `if [ "$1 $2" = "functionapp keys" ]; then printf 'TheFunctionKey0123456789=='; fi
if [ "$1 $2" = "aks get-credentials" ]; then while [ "$1" != --file ]; do shift; done; echo "kubeconfig of the member" > "$2"; fi`));
  writeFileSync(join(bin, "kubelogin"), recorder("kubelogin"));
  const failure =
    failFor === ""
      ? ""
      : failFor === "*"
        ? `echo "check: NOT READY (apiServerToWebhook): the API server could not call the webhook" >&2; exit 1`
        : `case " $* " in *" --cluster ${failFor} "*) echo "wire: the API server answered 403" >&2; exit 1;; esac`;
  writeFileSync(join(bin, "npm"), recorder("npm", failure));
  for (const name of ["az", "kubelogin", "npm"]) chmodSync(join(bin, name), 0o755);
  return bin;
}

const aks = (name: string) => `/subscriptions/1111/resourceGroups/rg-${name}/providers/Microsoft.ContainerService/managedClusters/aks-${name}`;
const secretOf = (name: string) => `${name}-secret_0123456789abcdefghijklmnopqrstuvwxyz`;

function run(env: Record<string, string>, failFor = ""): Run {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-wire-fleet-"));
  const bin = fakes(dir, failFor);
  const result = spawnSync("bash", [script], {
    encoding: "utf8",
    env: {
      PATH: `${bin}:${process.env.PATH ?? ""}`,
      HOME: dir,
      TMPDIR: dir,
      WEBHOOK_BASE_URL: "https://func-gmsa-abc.azurewebsites.net",
      WIRE_MODE: "url",
      IDENTITY_PRINCIPAL_ID: "11111111-2222-3333-4444-555555555555",
      ...env,
    },
  });
  let calls: Call[] = [];
  try {
    calls = readFileSync(join(dir, "calls.jsonl"), "utf8").trim().split("\n").filter(Boolean).map((line): Call => JSON.parse(line));
  } catch {
    calls = [];
  }
  return { status: result.status, output: `${result.stdout}${result.stderr}`, calls };
}

const members = [
  { name: "alpha", aksResourceId: aks("alpha") },
  { name: "beta", aksResourceId: aks("beta"), wire: { installCrd: false } },
  { name: "west-eu-2", aksResourceId: aks("west") },
];
const secrets = { alpha: secretOf("alpha"), beta: secretOf("beta"), "west-eu-2": `${secretOf("new")},${secretOf("old")}` };

function assertNoSecret(output: string): void {
  for (const secret of [...Object.values(secrets).flatMap((s) => s.split(",")), "TheFunctionKey0123456789=="]) assert.not.ok(output.includes(secret), "no secret is printed");
}

const Fleet = suite("wire-deployed.sh");

Fleet("wires each member without `wire`, with its own kubeconfig and secret (the new one of a rotation pair); the deployment wires the others", () => {
  const result = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets) });
  assert.is(result.status, 0, result.output);
  assertNoSecret(result.output);
  assert.match(result.output, /beta is wired by the deployment/);
  const wires = result.calls.filter((call) => call.command === "npm");
  assert.equal(wires.map((call) => call.args[call.args.indexOf("--cluster") + 1]), ["alpha", "west-eu-2"]);
  assert.equal(wires.map((call) => call.secretFile), [secretOf("alpha"), secretOf("new")]);
  for (const call of wires) {
    assert.equal(call.args.slice(0, 9), ["run", "--silent", "wire", "--", "--function-url", "https://func-gmsa-abc.azurewebsites.net", "--mode", "url", "--identity"]);
    assert.ok(call.args.includes("--apply"));
    assert.equal(call.args.slice(call.args.indexOf("--check"), call.args.indexOf("--check") + 3), ["--check", "--check-timeout-seconds", "180"], "each member is checked once wired");
    assert.not.ok(call.args.includes("--function-key-file"), "url mode sends no key");
  }
  assert.is.not(wires[0]!.kubeconfig, wires[1]!.kubeconfig, "a kubeconfig per member");
  const credentials = result.calls.filter((call) => call.command === "az" && call.args[1] === "get-credentials");
  assert.equal(credentials.map((call) => call.args.slice(2, 8)), [
    ["--subscription", "1111", "--resource-group", "rg-alpha", "--name", "aks-alpha"],
    ["--subscription", "1111", "--resource-group", "rg-west", "--name", "aks-west"],
  ]);
  assert.equal(result.calls.map((call) => call.command), ["az", "kubelogin", "npm", "az", "kubelogin", "npm"], "credentials, sign-in, wiring: member by member");
  const kubelogins = result.calls.filter((call) => call.command === "kubelogin");
  assert.equal(kubelogins.map((call) => call.args.slice(0, 3)), [["convert-kubeconfig", "-l", "azurecli"], ["convert-kubeconfig", "-l", "azurecli"]]);
  assert.equal(kubelogins.map((call) => call.args.at(-1)), wires.map((call) => call.kubeconfig), "kubelogin converts the kubeconfig the wiring uses");
});

Fleet("the app's requesting-user check and audit are granted by the wiring: their flags go to every member's npm run wire", () => {
  const plain = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets) });
  for (const call of plain.calls.filter((c) => c.command === "npm")) assert.not.ok(call.args.includes("--audit") || call.args.includes("--authorize-requesting-user"));
  const result = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets), GMSA_AUTHORIZE_REQUESTING_USER: "true", GMSA_AUDIT: "true" });
  assert.is(result.status, 0, result.output);
  const wires = result.calls.filter((call) => call.command === "npm");
  assert.is(wires.length, 2);
  for (const call of wires) assert.ok(call.args.includes("--authorize-requesting-user") && call.args.includes("--audit"), call.args.join(" "));
});

Fleet("relay mode reads the function key once and hands every member's wiring the file", () => {
  const result = run({
    GMSA_CLUSTERS: JSON.stringify(members),
    GMSA_CLUSTER_SECRETS_B64: Buffer.from(JSON.stringify(secrets)).toString("base64"),
    WIRE_MODE: "relay",
    FUNCTION_APP_NAME: "func-gmsa-abc",
    AZURE_RESOURCE_GROUP: "rg-gmsa",
  });
  assert.is(result.status, 0, result.output);
  assertNoSecret(result.output);
  assert.is(result.calls.filter((call) => call.command === "az" && call.args[1] === "keys").length, 1);
  const wires = result.calls.filter((call) => call.command === "npm");
  assert.equal(wires.map((call) => call.functionKeyFile), ["TheFunctionKey0123456789==", "TheFunctionKey0123456789=="]);
  assert.equal(wires.map((call) => call.secretFile), [secretOf("alpha"), secretOf("new")], "secrets from base64 (azd)");
});

Fleet("in a GitHub Actions job that may request OIDC tokens, kubelogin uses workload identity; the function key is read in the app's subscription", () => {
  const result = run({
    GMSA_CLUSTERS: JSON.stringify(members),
    GMSA_CLUSTER_SECRETS: JSON.stringify(secrets),
    WIRE_MODE: "relay",
    FUNCTION_APP_NAME: "func-gmsa-abc",
    AZURE_RESOURCE_GROUP: "rg-gmsa",
    AZURE_SUBSCRIPTION_ID: "2222",
    ACTIONS_ID_TOKEN_REQUEST_URL: "https://token.actions.example/request",
    ACTIONS_ID_TOKEN_REQUEST_TOKEN: "request-token",
    AZURE_CLIENT_ID: "client",
    AZURE_TENANT_ID: "tenant",
  });
  assert.is(result.status, 0, result.output);
  const kubelogins = result.calls.filter((call) => call.command === "kubelogin");
  assert.equal(kubelogins.map((call) => call.args.slice(0, 3)), [["convert-kubeconfig", "-l", "workloadidentity"], ["convert-kubeconfig", "-l", "workloadidentity"]]);
  const keys = result.calls.find((call) => call.command === "az" && call.args[1] === "keys");
  assert.equal(keys?.args.slice(0, 5), ["functionapp", "keys", "list", "--subscription", "2222"]);
  // Without the job's token request (azd, a person's shell), the CLI's session signs in.
  const local = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets), AZURE_CLIENT_ID: "client", AZURE_TENANT_ID: "tenant" });
  assert.ok(local.calls.filter((call) => call.command === "kubelogin").every((call) => call.args[2] === "azurecli"));
});

Fleet("a member without a secret, or whose wiring fails, is reported without its secret; the others are still wired, and the run fails", () => {
  const missing = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify({ "west-eu-2": secrets["west-eu-2"] }) });
  assert.is(missing.status, 1);
  assert.match(missing.output, /wire-deployed: alpha has no secret in the members' secrets/);
  assert.equal(missing.calls.filter((call) => call.command === "npm").map((call) => call.secretFile), [secretOf("new")]);
  const failing = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets) }, "alpha");
  assert.is(failing.status, 1);
  assertNoSecret(failing.output);
  assert.match(failing.output, /wiring or checking alpha failed; the other members go on/);
  assert.is(failing.calls.filter((call) => call.command === "npm").length, 2);
});

Fleet("names that could leave the work directory and IDs that are not managed clusters are refused before any call", () => {
  const result = run({
    GMSA_CLUSTERS: JSON.stringify([
      { name: "../x", aksResourceId: aks("x") },
      { name: "gamma", aksResourceId: "/subscriptions/1/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/x" },
    ]),
    GMSA_CLUSTER_SECRETS: JSON.stringify({ "../x": secretOf("x"), gamma: secretOf("gamma") }),
  });
  assert.is(result.status, 1);
  assert.match(result.output, /member name '\.\.\/x' is not a DNS label/);
  assert.match(result.output, /gamma: aksResourceId is not the resource ID of a managed cluster/);
  assert.equal(result.calls, []);
});

Fleet("one cluster (GMSA_AKS_RESOURCE_ID, as azd and the workflow name it): its kubeconfig, kubelogin, then wired on the single-cluster paths and checked", () => {
  const result = run({ GMSA_AKS_RESOURCE_ID: aks("solo"), WIRE_MODE: "relay", FUNCTION_APP_NAME: "func-gmsa-abc", AZURE_RESOURCE_GROUP: "rg-gmsa", GMSA_CHECK_TIMEOUT_SECONDS: "60" });
  assert.is(result.status, 0, result.output);
  assertNoSecret(result.output);
  assert.equal(result.calls.map((call) => call.command), ["az", "az", "kubelogin", "npm"], "the key, the credentials, the sign-in, the wiring");
  const wire = result.calls.find((call) => call.command === "npm")!;
  assert.equal(wire.args, [
    "run",
    "--silent",
    "wire",
    "--",
    "--function-url",
    "https://func-gmsa-abc.azurewebsites.net",
    "--mode",
    "relay",
    "--identity",
    "11111111-2222-3333-4444-555555555555",
    "--apply",
    "--check",
    "--check-timeout-seconds",
    "60",
    "--function-key-file",
    wire.args.at(-1)!,
  ]);
  assert.is(wire.functionKeyFile, "TheFunctionKey0123456789==");
  assert.not.ok(wire.args.includes("--cluster"), "a single cluster is wired on the top-level paths");
  const credentials = result.calls.find((call) => call.command === "az" && call.args[1] === "get-credentials")!;
  assert.equal(credentials.args.slice(2, 8), ["--subscription", "1111", "--resource-group", "rg-solo", "--name", "aks-solo"]);
  // A failed wiring or check fails the deployment, with the check's words.
  const failing = run({ GMSA_AKS_RESOURCE_ID: aks("solo") }, "*");
  assert.is(failing.status, 1);
  assert.match(failing.output, /NOT READY \(apiServerToWebhook\)/);
  const bad = run({ GMSA_AKS_RESOURCE_ID: "/subscriptions/1111/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/x" });
  assert.is(bad.status, 1);
  assert.match(bad.output, /GMSA_AKS_RESOURCE_ID is not the resource ID of a managed cluster/);
});

Fleet("a fleet is wired, not GMSA_AKS_RESOURCE_ID beside it", () => {
  const result = run({ GMSA_CLUSTERS: JSON.stringify(members), GMSA_CLUSTER_SECRETS: JSON.stringify(secrets), GMSA_AKS_RESOURCE_ID: aks("solo") });
  assert.is(result.status, 0, result.output);
  assert.ok(result.calls.filter((call) => call.command === "npm").every((call) => call.args.includes("--cluster")));
});

Fleet("no cluster at all: said loudly, no call; members without any secrets: a clear error", () => {
  for (const clusters of ["", "[]"]) {
    const result = run({ GMSA_CLUSTERS: clusters });
    assert.is(result.status, 0, result.output);
    assert.match(result.output, /NO CLUSTER IS WIRED: neither GMSA_AKS_RESOURCE_ID nor GMSA_CLUSTERS names one/);
    assert.equal(result.calls, []);
  }
  const noSecrets = run({ GMSA_CLUSTERS: JSON.stringify(members) });
  assert.is(noSecrets.status, 1);
  assert.match(noSecrets.output, /the members' secrets are missing: set GMSA_CLUSTER_SECRETS or GMSA_CLUSTER_SECRETS_B64/);
  assert.equal(noSecrets.calls, []);
});

Fleet("a malformed GMSA_CLUSTERS stops the wiring before any call (azd deploy runs without the preprovision check)", () => {
  for (const clusters of ["not json", JSON.stringify([members[0], "oops"]), JSON.stringify({ alpha: aks("alpha") })]) {
    const result = run({ GMSA_CLUSTERS: clusters, GMSA_CLUSTER_SECRETS: JSON.stringify(secrets) });
    assert.is(result.status, 1, `${clusters}: ${result.output}`);
    assert.match(result.output, /GMSA_CLUSTERS is not a JSON array of members/);
    assert.equal(result.calls, []);
  }
});

Fleet.run();
