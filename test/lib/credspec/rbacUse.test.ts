import { suite } from "uvu";
import * as assert from "uvu/assert";
import { rulesGrantUse, whoMayUse, type RbacObjects } from "../../../lib/credspec/rbacUse.js";

const Rules = suite("rulesGrantUse");

const use = { verbs: ["use"], apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"] };

const table: Array<{ what: string; rule: Record<string, string[]>; grants: boolean }> = [
  { what: "use on that name", rule: { ...use, resourceNames: ["webapp1"] }, grants: true },
  { what: "use on every name (no resourceNames)", rule: use, grants: true },
  { what: "use on every name (empty resourceNames)", rule: { ...use, resourceNames: [] }, grants: true },
  { what: "use on another name", rule: { ...use, resourceNames: ["payroll"] }, grants: false },
  { what: "every verb", rule: { ...use, verbs: ["*"] }, grants: true },
  { what: "every group and resource", rule: { verbs: ["use"], apiGroups: ["*"], resources: ["*"] }, grants: true },
  { what: "get only", rule: { ...use, verbs: ["get", "list"] }, grants: false },
  { what: "another group", rule: { ...use, apiGroups: [""] }, grants: false },
  { what: "another resource", rule: { ...use, resources: ["pods"] }, grants: false },
  { what: "a subresource", rule: { ...use, resources: ["gmsacredentialspecs/status"] }, grants: false },
];

for (const row of table) {
  Rules(`${row.what}: ${row.grants ? "grants" : "does not grant"} use of webapp1`, () => {
    assert.is(rulesGrantUse([{ verbs: [], ...row.rule }], "webapp1"), row.grants);
  });
}

Rules("a role without rules (an aggregated one not yet filled in) grants nothing", () => {
  assert.is(rulesGrantUse(null, "webapp1"), false);
  assert.is(rulesGrantUse(undefined, "webapp1"), false);
});

Rules.run();

const Who = suite("whoMayUse");

const rbac: RbacObjects = {
  clusterRoles: [
    { metadata: { name: "all-gmsa" }, rules: [{ verbs: ["*"], apiGroups: ["windows.k8s.io"], resources: ["*"] }] },
    { metadata: { name: "nothing" }, rules: [{ verbs: ["get"], apiGroups: [""], resources: ["pods"] }] },
  ],
  roles: [
    { metadata: { name: "use-webapp1", namespace: "shop" }, rules: [{ ...use, resourceNames: ["webapp1"] }] },
    { metadata: { name: "use-payroll", namespace: "shop" }, rules: [{ ...use, resourceNames: ["payroll"] }] },
  ],
  clusterRoleBindings: [
    { metadata: { name: "ops" }, roleRef: { kind: "ClusterRole", name: "all-gmsa" }, subjects: [{ kind: "Group", name: "ops" }] },
    { metadata: { name: "readers" }, roleRef: { kind: "ClusterRole", name: "nothing" }, subjects: [{ kind: "User", name: "eve" }] },
  ],
  roleBindings: [
    { metadata: { name: "orders", namespace: "shop" }, roleRef: { kind: "Role", name: "use-webapp1" }, subjects: [{ kind: "ServiceAccount", name: "orders" }] },
    {
      metadata: { name: "billing", namespace: "shop" },
      roleRef: { kind: "Role", name: "use-payroll" },
      subjects: [{ kind: "ServiceAccount", name: "billing", namespace: "shop" }],
    },
    {
      metadata: { name: "wide", namespace: "tools" },
      roleRef: { kind: "ClusterRole", name: "all-gmsa" },
      subjects: [{ kind: "ServiceAccount", name: "runner", namespace: "tools" }],
    },
    // A Role of the same name in another namespace does not count.
    { metadata: { name: "stray", namespace: "other" }, roleRef: { kind: "Role", name: "use-webapp1" }, subjects: [{ kind: "ServiceAccount", name: "stray", namespace: "other" }] },
  ],
};

Who("lists every subject a binding of a granting role names, with where and through what", () => {
  const found = whoMayUse(rbac, "webapp1");
  assert.equal(
    found.map((f) => [f.subject.kind, f.subject.namespace ?? "", f.subject.name, f.namespace ?? "*"]),
    [
      ["Group", "", "ops", "*"],
      ["ServiceAccount", "shop", "orders", "shop"],
      ["ServiceAccount", "tools", "runner", "tools"],
    ],
  );
  assert.is(found[1]!.via, "RoleBinding shop/orders -> Role use-webapp1");
});

Who("--namespace keeps cluster-wide grants and the bindings of that namespace", () => {
  assert.equal(
    whoMayUse(rbac, "webapp1", "tools").map((f) => f.subject.name),
    ["ops", "runner"],
  );
});

Who.run();
