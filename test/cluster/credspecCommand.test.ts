import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { parse, parseAllDocuments } from "yaml";
import type { KubeConfig } from "@kubernetes/client-node";
import { runCredspec } from "../../cluster/credspecCommand.js";
import { judgeCredSpecObject } from "../../lib/credspec/validateCredSpecObject.js";
import { fixturePath } from "../lib/credspec/credSpecFixtures.js";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(args: string[], files: Record<string, Uint8Array | string> = {}): Promise<Run> {
  let stdout = "";
  let stderr = "";
  const code = await runCredspec(args, {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    readFile: (path) => {
      const given = files[path];
      if (given !== undefined) return typeof given === "string" ? Buffer.from(given) : given;
      return readFileSync(path);
    },
    kubeConfig: (): KubeConfig => {
      throw new Error("no cluster in this test");
    },
  });
  return { code, stdout, stderr };
}

const domain = ["--dns-name", "contoso.com", "--netbios-name", "CONTOSO", "--sid", "S-1-5-21-2126729477-2524075714-3094792973", "--guid", "244818ae-87ca-4fcd-92ec-e79e5252348a"];

const Generate = suite("credspec generate");

Generate("writes a GMSACredentialSpec with every account under both names, which the webhook admits without a warning", async () => {
  const result = await run(["generate", ...domain, "--account", "WebApp1", "--extra-account", "Reporting"]);
  assert.is(result.code, 0, result.stderr);
  assert.is(result.stderr, "");
  const object = parse(result.stdout);
  assert.is(object.kind, "GMSACredentialSpec");
  assert.is(object.metadata.name, "webapp1");
  assert.equal(object.credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts, [
    { Name: "WebApp1", Scope: "contoso.com" },
    { Name: "WebApp1", Scope: "CONTOSO" },
    { Name: "Reporting", Scope: "contoso.com" },
    { Name: "Reporting", Scope: "CONTOSO" },
  ]);
  const verdict = judgeCredSpecObject({ uid: "u", kind: { group: "windows.k8s.io", version: "v1", kind: "GMSACredentialSpec" }, operation: "CREATE", object });
  assert.equal(verdict, { kind: "allowed", patch: [], warnings: [], credSpecs: ["webapp1"] });
});

Generate("--plugin akv writes the Key Vault plug-in's GUID and input", async () => {
  const result = await run([
    "generate",
    ...domain,
    "--account",
    "WebApp1",
    "--name",
    "web",
    "--plugin",
    "akv",
    "--secret-uri",
    "https://kv1.vault.azure.net/secrets/gmsa",
    "--object-id",
    "0b6f3c1e-1111-4222-8333-444455556666",
  ]);
  assert.is(result.code, 0, result.stderr);
  assert.equal(parse(result.stdout).credspec.ActiveDirectoryConfig.HostAccountConfig, {
    PortableCcgVersion: "1",
    PluginGUID: "{CCC2A336-D7F3-4818-A213-272B7924213E}",
    PluginInput: "ObjectId=0b6f3c1e-1111-4222-8333-444455556666;SecretUri=https://kv1.vault.azure.net/secrets/gmsa",
  });
});

Generate("bad facts print nothing to apply, and name the field and the flag", async () => {
  const result = await run(["generate", ...domain.slice(0, 4), "--sid", "S-1-5-21-1", "--guid", "{244818ae-87ca-4fcd-92ec-e79e5252348a}", "--account", "WebApp1"]);
  assert.is(result.code, 1);
  assert.is(result.stdout, "");
  assert.match(result.stderr, /error: credspec\.DomainJoinConfig\.Sid: must be a domain SID .* \(--sid\)/);
  assert.match(result.stderr, /error: credspec\.DomainJoinConfig\.Guid: must be a GUID without braces .* \(--guid\)/);
});

Generate("a raw plug-in GUID of no documented plug-in is written, with a warning", async () => {
  const result = await run(["generate", ...domain, "--account", "WebApp1", "--plugin-guid", "{11111111-2222-3333-4444-555555555555}", "--plugin-input", "vault=a"]);
  assert.is(result.code, 0);
  assert.match(result.stderr, /warning: credspec\.ActiveDirectoryConfig\.HostAccountConfig\.PluginGUID: is none of the documented plug-ins/);
  assert.is(parse(result.stdout).credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID, "{11111111-2222-3333-4444-555555555555}");
});

Generate("--from-json reads what New-CredentialSpec writes, UTF-16 with a byte-order mark included", async () => {
  const json = JSON.stringify(parse(readFileSync(fixturePath("domain-joined.yaml"), "utf8")).credspec, null, 4);
  const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, "utf16le")]);
  const result = await run(["generate", "--from-json", "spec.json"], { "spec.json": utf16 });
  assert.is(result.code, 0, result.stderr);
  const object = parse(result.stdout);
  assert.is(object.metadata.name, "webapplication1");
  assert.equal(object.credspec, JSON.parse(json));
});

Generate("usage mistakes exit 2 with the usage", async () => {
  for (const args of [["generate", "--dns-name", "contoso.com"], ["generate", "--bogus"], ["generate", ...domain, "--account", "A", "--plugin", "aws"], ["nothing"]]) {
    const result = await run(args);
    assert.is(result.code, 2, args.join(" "));
    assert.match(result.stderr, /usage: npm run credspec/);
  }
});

Generate.run();

const Help = suite("credspec help");

Help("--help, help and <command> --help print the usage on stdout and exit 0; an unknown command still exits 2", async () => {
  for (const args of [["--help"], ["-h"], ["help"], ["lint", "--help"], ["generate", "--dns-name", "x", "--help"]]) {
    const result = await run(args);
    assert.is(result.code, 0, args.join(" "));
    assert.match(result.stdout, /usage: npm run credspec -- <command>/, args.join(" "));
    assert.is(result.stderr, "", args.join(" "));
  }
  const unknown = await run(["frobnicate"]);
  assert.is(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "frobnicate"/);
});

Help.run();

const Lint = suite("credspec lint");

Lint("well-formed files pass, each spec reported", async () => {
  const result = await run(["lint", fixturePath("domain-joined.yaml"), fixturePath("aks-keyvault.yaml"), fixturePath("eks-domainless.yaml")]);
  assert.is(result.code, 0, result.stderr);
  assert.is(result.stdout.split("\n").filter((line) => line.endsWith(": ok")).length, 3);
});

Lint("a broken spec among several fails the run, naming the file, the object and the field", async () => {
  const broken = readFileSync(fixturePath("domain-joined.yaml"), "utf8").replace("NetBiosName: CONTOSO", "NetBiosName: CONTOSO-WORLDWIDE-INC");
  const result = await run(["lint", "good.yaml", "broken.yaml"], { "good.yaml": readFileSync(fixturePath("aks-keyvault.yaml")), "broken.yaml": broken });
  assert.is(result.code, 1);
  assert.match(result.stderr, /^error: broken\.yaml: GMSACredentialSpec "webapp1-credspec": credspec\.DomainJoinConfig\.NetBiosName: must be a NetBIOS name/m);
  assert.match(result.stdout, /good\.yaml: GMSACredentialSpec "payroll-gmsa": ok/);
});

Lint("warnings are printed and do not fail the run", async () => {
  const suspicious = readFileSync(fixturePath("domain-joined.yaml"), "utf8").replace("DnsTreeName: contoso.com", "DnsTreeName: fabrikam.com");
  const result = await run(["lint", "s.yaml"], { "s.yaml": suspicious });
  assert.is(result.code, 0);
  assert.match(result.stderr, /warning: s\.yaml: GMSACredentialSpec "webapp1-credspec": credspec\.DomainJoinConfig\.DnsTreeName/);
  assert.match(result.stdout, /ok \(1 warning\)/);
});

Lint("bare credential spec JSON is checked from its root", async () => {
  const credspec = parse(readFileSync(fixturePath("domain-joined.yaml"), "utf8")).credspec;
  delete credspec.CmsPlugins;
  const result = await run(["lint", "spec.json"], { "spec.json": JSON.stringify(credspec) });
  assert.is(result.code, 1);
  assert.match(result.stderr, /error: spec\.json: CmsPlugins: is required/);
});

Lint("an unreadable file, duplicate keys, or a file with no credential spec fail", async () => {
  const duplicate = readFileSync(fixturePath("domain-joined.yaml"), "utf8").replace("    Sid:", "    DnsName: evil.example\n    Sid:");
  for (const [name, content] of [
    ["dup.yaml", duplicate],
    ["pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"],
  ] as const) {
    const result = await run(["lint", name], { [name]: content });
    assert.is(result.code, 1, name);
  }
  const missing = await run(["lint", "/nonexistent/credspec.yaml"]);
  assert.is(missing.code, 1);
  assert.match(missing.stderr, /\/nonexistent\/credspec\.yaml: /);
});

Lint("a spec whose keys exist only under __proto__ fails, naming the reserved key, in JSON and in YAML", async () => {
  const credspec = parse(readFileSync(fixturePath("domain-joined.yaml"), "utf8")).credspec;
  const { CmsPlugins, ...rest } = credspec;
  const hidden = `{"CmsPlugins": ${JSON.stringify(CmsPlugins)}, "__proto__": ${JSON.stringify(rest)}}`;
  const yaml = `apiVersion: windows.k8s.io/v1\nkind: GMSACredentialSpec\nmetadata: {name: hidden}\ncredspec:\n  __proto__: ${JSON.stringify(credspec)}\n`;
  for (const [name, content, path] of [
    ["spec.json", hidden, "__proto__"],
    ["spec.yaml", yaml, "credspec\\.__proto__"],
  ] as const) {
    const result = await run(["lint", name], { [name]: content });
    assert.is(result.code, 1, `${name}: ${result.stdout}`);
    assert.match(result.stderr, new RegExp(`${path}: is a reserved key`), name);
  }
});

Lint.run();

const Grant = suite("credspec grant");

Grant("a Role with use on that one spec, bound to the service account in its namespace", async () => {
  const result = await run(["grant", "webapp1", "--service-account", "apps/web"]);
  assert.is(result.code, 0, result.stderr);
  const [role, binding] = parseAllDocuments(result.stdout).map((d) => d.toJS());
  assert.equal(role, {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name: "gmsa-use-webapp1", namespace: "apps", labels: { "app.kubernetes.io/managed-by": "gmsa-admission-credspec" } },
    rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: ["webapp1"] }],
  });
  assert.equal(binding.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "gmsa-use-webapp1" });
  assert.equal(binding.subjects, [{ kind: "ServiceAccount", name: "web", namespace: "apps" }]);
  assert.is(binding.metadata.namespace, "apps");
});

Grant("--cluster-wide makes the role a ClusterRole, still bound in the account's namespace only", async () => {
  const result = await run(["grant", "webapp1", "--service-account", "apps/web", "--cluster-wide"]);
  const [role, binding] = parseAllDocuments(result.stdout).map((d) => d.toJS());
  assert.is(role.kind, "ClusterRole");
  assert.is(role.metadata.namespace, undefined);
  assert.is(binding.kind, "RoleBinding");
  assert.equal(binding.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "gmsa-use-webapp1" });
});

Grant("refuses a bad name or account before printing anything", async () => {
  for (const args of [
    ["grant", "Web App", "--service-account", "apps/web"],
    ["grant", "webapp1", "--service-account", "web"],
    ["grant", "webapp1", "--service-account", "Apps/web"],
    ["grant", "webapp1"],
  ]) {
    const result = await run(args);
    assert.is(result.code, 2, args.join(" "));
    assert.is(result.stdout, "");
  }
});

Grant.run();
