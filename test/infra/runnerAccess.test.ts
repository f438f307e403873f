import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { repoRoot } from "./bicepTree.js";

/**
 * scripts/runner-access.sh, which admits the deploying machine to a Flex app with an address
 * allow-list and takes it out again. Flex refuses a write of the whole site configuration, so
 * the only write is a PATCH of sites/config/web carrying ipSecurityRestrictions alone. A fake `az`
 * on PATH serves the site and its configuration from files and records every write.
 */
const script = join(repoRoot, "scripts", "runner-access.sh");

interface Site {
  publicNetworkAccess: "Enabled" | "Disabled";
  config: { ipSecurityRestrictionsDefaultAction?: string; ipSecurityRestrictions?: unknown[]; ftpsState?: string; minTlsVersion?: string };
}

function fakeAz(dir: string): string {
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(
    join(bin, "az"),
    `#!/usr/bin/env bash
set -eu
state="${dir}/site.json"
if [ "$1 $2" = "cloud show" ]; then echo "https://management.azure.com/"; exit 0; fi
if [ "$1 $2" = "account show" ]; then [ -f "${dir}/signed-out" ] && exit 1; exit 0; fi
[ "$1" = rest ] || { echo "unexpected az $*" >&2; exit 3; }
method="" url="" body="" query=""
while [ $# -gt 0 ]; do
  case "$1" in --method) method="$2"; shift;; --url) url="$2"; shift;; --body) body="$2"; shift;; --query) query="$2"; shift;; esac
  shift
done
echo "$method $url" >> "${dir}/calls"
case "$method $url" in
  "get "*"/config/web?"*) jq '{properties: .config}' "$state";;
  "get "*) jq -r '.publicNetworkAccess' "$state";;
  "patch "*"/config/web?"*)
    printf '%s\\n' "$body" >> "${dir}/patches"
    jq --argjson body "$body" '.config += $body.properties' "$state" > "$state.new" && mv "$state.new" "$state";;
  *) echo "unexpected az rest $method $url" >&2; exit 3;;
esac
`,
  );
  chmodSync(join(bin, "az"), 0o755);
  return bin;
}

const clusterRule = { name: "cluster-egress-0", ipAddress: "20.1.2.3/32", action: "Allow", priority: 100 };

function run(dir: string, action: string, env: Record<string, string> = {}) {
  const bin = fakeAz(dir);
  const result = spawnSync("bash", [script, action], {
    encoding: "utf8",
    env: { PATH: `${bin}:${process.env.PATH ?? ""}`, AZURE_SUBSCRIPTION_ID: "1111", AZURE_RESOURCE_GROUP: "rg-gmsa", FUNCTION_APP_NAME: "func-gmsa-abc", RUNNER_IP: "52.9.8.7", GITHUB_ENV: join(dir, "github-env"), ...env },
  });
  const read = (file: string) => {
    try {
      return readFileSync(join(dir, file), "utf8").trim().split("\n").filter(Boolean);
    } catch {
      return [];
    }
  };
  return { status: result.status, output: `${result.stdout}${result.stderr}`, patches: read("patches").map((line) => JSON.parse(line)), calls: read("calls"), site: JSON.parse(readFileSync(join(dir, "site.json"), "utf8")) as Site };
}

function siteIn(site: Site): string {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-runner-access-"));
  writeFileSync(join(dir, "site.json"), JSON.stringify(site));
  return dir;
}

const Access = suite("runner-access.sh");

const otherDeployer = { name: "deploy-runner-20-30-40-50", ipAddress: "20.30.40.50/32", action: "Allow", priority: 50 };

Access("add: one PATCH of config/web that carries the restrictions alone, the cluster's and another deployer's rules kept and this runner's /32 added; remove takes out its own alone", () => {
  const dir = siteIn({ publicNetworkAccess: "Enabled", config: { ipSecurityRestrictionsDefaultAction: "Deny", ipSecurityRestrictions: [clusterRule, otherDeployer], minTlsVersion: "1.2" } });
  const added = run(dir, "add");
  assert.is(added.status, 0, added.output);
  assert.is(added.patches.length, 1);
  assert.equal(Object.keys(added.patches[0]), ["properties"]);
  assert.equal(Object.keys(added.patches[0].properties), ["ipSecurityRestrictions"], "nothing but the restrictions is written");
  assert.equal(added.site.config.ipSecurityRestrictions, [
    clusterRule,
    otherDeployer,
    { name: "deploy-runner-52-9-8-7", description: "The machine that deploys (removed after the deployment)", ipAddress: "52.9.8.7/32", action: "Allow", priority: 50 },
  ]);
  assert.is(readFileSync(join(dir, "github-env"), "utf8"), "RUNNER_IP=52.9.8.7\n", "the job's later remove names the same address");
  assert.ok(added.calls.every((call) => call.startsWith("get ") || call.startsWith("patch https://management.azure.com/subscriptions/1111/resourceGroups/rg-gmsa/providers/Microsoft.Web/sites/func-gmsa-abc/config/web?")), added.calls.join("\n"));

  const again = run(dir, "add");
  assert.is(again.status, 0, again.output);
  assert.is((again.site.config.ipSecurityRestrictions ?? []).filter((r) => (r as { name: string }).name === "deploy-runner-52-9-8-7").length, 1, "adding twice leaves one rule");

  const removed = run(dir, "remove");
  assert.is(removed.status, 0, removed.output);
  assert.equal(removed.site.config.ipSecurityRestrictions, [clusterRule, otherDeployer], "another deployer's access stays");
  assert.equal(removed.site.config.minTlsVersion, "1.2");
  const nothing = run(dir, "remove");
  assert.is(nothing.patches.length, removed.patches.length, "nothing to remove: no write");
});

Access("an app that admits every address, or takes no public traffic, is left alone", () => {
  for (const site of [
    { publicNetworkAccess: "Enabled", config: { ipSecurityRestrictionsDefaultAction: "Allow", ipSecurityRestrictions: [] } },
    { publicNetworkAccess: "Disabled", config: { ipSecurityRestrictionsDefaultAction: "Deny", ipSecurityRestrictions: [clusterRule] } },
  ] as Site[]) {
    const result = run(siteIn(site), "add");
    assert.is(result.status, 0, result.output);
    assert.equal(result.patches, [], JSON.stringify(site));
  }
});

Access("without a signed-in az it warns and changes nothing (azd may be signed in on its own)", () => {
  const dir = siteIn({ publicNetworkAccess: "Enabled", config: { ipSecurityRestrictionsDefaultAction: "Deny", ipSecurityRestrictions: [clusterRule] } });
  writeFileSync(join(dir, "signed-out"), "");
  const result = run(dir, "add");
  assert.is(result.status, 0);
  assert.match(result.output, /az is not signed in/);
  assert.equal(result.patches, []);
});

Access("refuses what is not an IPv4 address, and an unknown action, before writing anything", () => {
  const dir = siteIn({ publicNetworkAccess: "Enabled", config: { ipSecurityRestrictionsDefaultAction: "Deny", ipSecurityRestrictions: [] } });
  const bad = run(dir, "add", { RUNNER_IP: "52.9.8.7/0" });
  assert.is(bad.status, 1);
  assert.equal(bad.patches, []);
  assert.is(run(dir, "open").status, 2);
});

Access.run();
