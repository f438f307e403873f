import { suite } from "uvu";
import * as assert from "uvu/assert";
import { checkCredSpec } from "../../../lib/credspec/checkCredSpec.js";
import { credSpecFile } from "./credSpecFixtures.js";
import { refused, suspicious } from "./credSpecVariants.js";

const wellFormed = ["domain-joined.yaml", "aks-keyvault.yaml", "eks-domainless.yaml"];

const Check = suite("checkCredSpec");

for (const file of wellFormed) {
  Check(`${file} is a well-formed credential spec with nothing suspicious`, () => {
    assert.equal(checkCredSpec(credSpecFile(file).credspec), { errors: [], warnings: [] });
  });
}

Check("an object without credspec is refused at credspec", () => {
  assert.equal(checkCredSpec(credSpecFile("no-credspec.yaml").credspec).errors, [{ path: "credspec", problem: "is required" }]);
});

for (const variant of refused) {
  Check(`refuses ${variant.what}, naming ${variant.path}`, () => {
    const object = credSpecFile(variant.file ?? "domain-joined.yaml");
    const credspec = variant.what === "credspec is a list" ? [object.credspec] : object.credspec;
    variant.edit(credspec);
    const { errors } = checkCredSpec(credspec);
    const finding = errors.find((e) => e.path === variant.path);
    assert.ok(finding, `expected an error at ${variant.path}, got ${JSON.stringify(errors)}`);
    assert.match(finding.problem, variant.problem);
  });
}

for (const variant of suspicious) {
  Check(`admits ${variant.what} with a warning at ${variant.path}`, () => {
    const credspec = credSpecFile(variant.file ?? "domain-joined.yaml").credspec;
    variant.edit(credspec);
    const { errors, warnings } = checkCredSpec(credspec);
    assert.equal(errors, []);
    const finding = warnings.find((w) => w.path === variant.path && variant.problem.test(w.problem));
    assert.ok(finding, `expected a warning at ${variant.path}, got ${JSON.stringify(warnings)}`);
  });
}

Check("a Key Vault secret URI in the plug-in's input is not taken for a password", () => {
  assert.equal(checkCredSpec(credSpecFile("aks-keyvault.yaml").credspec).warnings, []);
});

Check("findings never repeat the values they are about", () => {
  const credspec = credSpecFile("aks-keyvault.yaml").credspec;
  credspec.DomainJoinConfig.Sid = "S-1-5-21-99-SECRETVALUE";
  credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput = "User=svc;Password=TopSecret1";
  credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID = "{00000000-0000-0000-0000-00000000BEEF}";
  const broken = JSON.stringify(checkCredSpec(credspec));
  assert.not.match(broken, /SECRETVALUE/);
  credspec.DomainJoinConfig.Sid = "S-1-5-21-1-2-3";
  const warned = JSON.stringify(checkCredSpec(credspec));
  assert.match(warned, /password inline/);
  assert.not.match(warned, /TopSecret1/);
  assert.not.match(warned, /BEEF/);
});

Check("findings start from the root they are given", () => {
  const { errors } = checkCredSpec({ CmsPlugins: ["ActiveDirectory"] }, "");
  assert.ok(
    errors.some((e) => e.path === "DomainJoinConfig"),
    JSON.stringify(errors),
  );
});

Check("a plug-in list past the bound is refused as a list, its items not read one by one", () => {
  const spec = credSpecFile("domain-joined.yaml").credspec;
  // About 4 MB of JSON, past the body limit, as a bound far above any spec: decoded item by item
  // it took seconds and gave a finding per item.
  spec.CmsPlugins = new Array(2_000_000).fill(1);
  const report = checkCredSpec(spec);
  assert.equal(
    report.errors.map((e) => `${e.path}: ${e.problem}`),
    ['credspec.CmsPlugins: must be a list of at most 16 strings that contains "ActiveDirectory"'],
  );
  // Within the bound, each item is still judged.
  spec.CmsPlugins = ["ActiveDirectory", 7];
  assert.equal(
    checkCredSpec(spec).errors.map((e) => e.path),
    ["credspec.CmsPlugins[1]"],
  );
});

Check("an object that lends fields through a prototype of its own is judged by its own keys only", () => {
  const { Guid, ...ownFields } = credSpecFile("domain-joined.yaml").credspec.DomainJoinConfig;
  const spec = credSpecFile("domain-joined.yaml").credspec;
  // Every key spelled as documented, the Guid only inherited: no JSON or YAML reader makes this,
  // but a caller in this process could.
  spec.DomainJoinConfig = Object.assign(Object.create({ Guid }), ownFields);
  assert.equal(
    checkCredSpec(spec).errors.map((e) => `${e.path}: ${e.problem}`),
    ["credspec.DomainJoinConfig.Guid: is required"],
  );
});

Check.run();
