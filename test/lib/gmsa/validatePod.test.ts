import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../../lib/gmsa/canonicalJson.js";
import type { Principal } from "../../../lib/gmsa/ports.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { admission, fakePorts } from "../../support/fakePorts.js";
import { credSpecFixture } from "../../support/fixtures.js";
import { gmsa, pod, type PodSpec } from "../../support/reviews.js";

const webappSpec = credSpecFixture("webapp1-credspec").credspec!;
const webapp = canonicalJson(webappSpec);

function podWith(edit: (p: PodSpec) => void): PodSpec {
  const p = pod({ serviceAccountName: "web" });
  edit(p);
  return p;
}

const onlyGrant = (user: string, name: string) => (p: Principal, n: string) => ({ allowed: p.user === user && n === name });

const Create = suite("validatePod on CREATE");

Create("allows a pod whose service account may use every named credential spec", async () => {
  const ports = fakePorts({ decide: onlyGrant("system:serviceaccount:apps:web", "webapp1-credspec") });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec", webapp))),
    ),
    ports,
  );
  assert.equal(verdict, { kind: "allowed", patch: [], warnings: [], credSpecs: ["webapp1-credspec"] });
});

Create("asks about the service account as its token would present it, in the pod's namespace", async () => {
  const ports = fakePorts();
  await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    ports,
  );
  assert.equal(ports.reviews, [
    {
      namespace: "apps",
      name: "webapp1-credspec",
      principal: {
        user: "system:serviceaccount:apps:web",
        groups: ["system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"],
        serviceAccount: { namespace: "apps", name: "web" },
      },
    },
  ]);
});

Create("takes the default service account when the pod names none", async () => {
  const ports = fakePorts();
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  await validatePod(admission("CREATE", p), ports);
  assert.is(ports.reviews[0]!.principal.user, "system:serviceaccount:apps:default");
});

Create("asks once per distinct name", async () => {
  const ports = fakePorts();
  const p = podWith((p) => {
    p.spec.securityContext = gmsa("webapp1-credspec");
    p.spec.containers.push({ name: "b", securityContext: gmsa("webapp1-credspec") });
    p.spec.initContainers = [{ name: "i", securityContext: gmsa("payroll-gmsa") }];
  });
  await validatePod(admission("CREATE", p), ports);
  assert.equal(ports.reviews.map((r) => r.name).sort(), ["payroll-gmsa", "webapp1-credspec"]);
  assert.equal([...ports.lookups].sort(), ["payroll-gmsa", "webapp1-credspec"]);
});

// The error table: every row, at every kind of place.
const placeEdits: Array<[string, string, (p: PodSpec, name?: string, contents?: string) => void]> = [
  ["pod", 'pod "web-0"', (p, n, c) => (p.spec.securityContext = gmsa(n, c))],
  ["container", 'container "iis" of pod "web-0"', (p, n, c) => (p.spec.containers[0]!.securityContext = gmsa(n, c))],
  ["init container", 'init container "setup" of pod "web-0"', (p, n, c) => (p.spec.initContainers = [{ name: "setup", securityContext: gmsa(n, c) }])],
  ["ephemeral container", 'ephemeral container "debug" of pod "web-0"', (p, n, c) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa(n, c) }])],
  [
    "pod annotation",
    'pod "web-0"',
    (p, n, c) =>
      (p.metadata.annotations = {
        ...(n !== undefined ? { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": n } : {}),
        ...(c !== undefined ? { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec": c } : {}),
      }),
  ],
  [
    "container annotation",
    'container "iis" of pod "web-0"',
    (p, n, c) =>
      (p.metadata.annotations = {
        ...(n !== undefined ? { "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": n } : {}),
        ...(c !== undefined ? { "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec": c } : {}),
      }),
  ],
];

const rows: Array<{ what: string; name?: string; contents?: string; deny?: boolean; code: number; reason: RegExp }> = [
  {
    what: "the service account may not use the credential spec",
    name: "webapp1-credspec",
    deny: true,
    code: 403,
    reason: /service account "web" in namespace "apps" is not authorized to use GMSACredentialSpec "webapp1-credspec"/,
  },
  { what: "the credential spec does not exist", name: "nope", code: 422, reason: /GMSACredentialSpec "nope" does not exist/ },
  { what: "the credential spec has no credspec object", name: "empty-credspec", code: 422, reason: /GMSACredentialSpec "empty-credspec" has no credspec object/ },
  { what: "contents are set without a name", contents: webapp, code: 422, reason: /contents are set without a credential spec name/ },
  {
    what: "contents differ from the named credential spec",
    name: "webapp1-credspec",
    contents: '{"CmsPlugins":["ActiveDirectory"]}',
    code: 422,
    reason: /contents do not match GMSACredentialSpec "webapp1-credspec"/,
  },
  { what: "contents are not JSON", name: "webapp1-credspec", contents: "not json", code: 422, reason: /not valid JSON/ },
  { what: "the name is not a valid object name", name: "Web App", code: 422, reason: /"Web App" .* is not a valid GMSACredentialSpec name/ },
];

for (const [place, owner, edit] of placeEdits) {
  for (const row of rows) {
    Create(`at ${place}: refuses with ${row.code} when ${row.what}`, async () => {
      const ports = fakePorts({ decide: () => ({ allowed: !row.deny }) });
      const verdict = await validatePod(
        admission(
          "CREATE",
          podWith((p) => edit(p, row.name, row.contents)),
        ),
        ports,
      );
      assert.is(verdict.kind, "denied");
      if (verdict.kind !== "denied") return;
      assert.is(verdict.code, row.code);
      assert.match(verdict.message, row.reason);
      assert.ok(verdict.message.startsWith(`${owner}: `), verdict.message);
    });
  }
  Create(`at ${place}: accepts contents equal to the credential spec in any key order and spacing`, async () => {
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(webappSpec).reverse()), null, 2);
    const verdict = await validatePod(
      admission(
        "CREATE",
        podWith((p) => edit(p, "webapp1-credspec", reordered)),
      ),
      fakePorts(),
    );
    assert.is(verdict.kind, "allowed");
  });
}

Create("judges authorization before existence, so a refused user learns nothing about which specs exist", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("does-not-exist"))),
    ),
    ports,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 403);
});

Create("looks nothing up for a principal without use, so refusals cost the API server no read", async () => {
  const ports = fakePorts({ decide: (_, name) => ({ allowed: name === "webapp1-credspec" }) });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => {
        p.spec.securityContext = gmsa("webapp1-credspec");
        p.spec.containers[0]!.securityContext = gmsa("payroll-gmsa");
      }),
    ),
    ports,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.equal(ports.lookups, []);
});

const duplicated = [
  ["a top-level key", '{"CmsPlugins":["ActiveDirectory"],"CmsPlugins":["ActiveDirectory"]}', "CmsPlugins"],
  ["a nested key", JSON.stringify(webappSpec).replace('"DomainJoinConfig":{', '"DomainJoinConfig":{"Sid":"S-1-5-21-0",'), "Sid"],
  ["a key spelled with an escape", '{"a":1,"\\u0061":1}', "a"],
] as const;
for (const [what, contents, key] of duplicated) {
  Create(`refuses with 422 contents that give ${what} twice`, async () => {
    const verdict = await validatePod(
      admission(
        "CREATE",
        podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec", contents))),
      ),
      fakePorts(),
    );
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(verdict.kind === "denied" ? verdict.message : "", `give the key "${key}" more than once`);
  });
}

Create("refuses with 422 contents whose last duplicate would make them match", async () => {
  const { ActiveDirectoryConfig, ...rest } = webappSpec as Record<string, unknown>;
  const sneaky = `${JSON.stringify({ ...rest, ActiveDirectoryConfig: { GroupManagedServiceAccounts: [{ Name: "DomainAdmins", Scope: "CONTOSO" }] } }).slice(0, -1)},"ActiveDirectoryConfig":${JSON.stringify(ActiveDirectoryConfig)}}`;
  assert.equal(JSON.parse(sneaky), webappSpec, "JSON.parse alone would take it for the spec");
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith(
        (p) =>
          (p.metadata.annotations = {
            "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec",
            "pod.alpha.windows.kubernetes.io/gmsa-credential-spec": sneaky,
          }),
      ),
    ),
    fakePorts(),
  );
  assert.is(verdict.kind === "denied" && verdict.code, 422);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /give the key "ActiveDirectoryConfig" more than once/);
});

Create("refuses with 422, without overflowing, contents nested 100 000 levels deep", async () => {
  const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec", deep))),
    ),
    fakePorts(),
  );
  assert.is(verdict.kind === "denied" && verdict.code, 422);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /nested more than 64 levels/);
});

Create("makes no API call for a name that is not valid", async () => {
  const ports = fakePorts();
  await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("UPPER"))),
    ),
    ports,
  );
  assert.equal(ports.reviews, []);
  assert.equal(ports.lookups, []);
});

Create("a pod without GMSA settings is allowed without any API call", async () => {
  const ports = fakePorts();
  assert.is((await validatePod(admission("CREATE", pod()), ports)).kind, "allowed");
  assert.equal(ports.reviews.length + ports.lookups.length, 0);
});

Create("a 403 says how to grant use: the grant command and what it makes, for that account and spec only", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    ports,
  );
  const message = verdict.kind === "denied" ? verdict.message : "";
  assert.match(message, /; if the name is right, to grant it: npm run credspec -- grant webapp1-credspec --service-account apps\/web --apply /);
  assert.match(
    message,
    /\(a Role gmsa-use-webapp1-credspec in namespace apps with the verb use on gmsacredentialspecs\.windows\.k8s\.io, resourceNames \[webapp1-credspec\], and a RoleBinding gmsa-use-webapp1-credspec-web of it to the service account\)$/,
  );
  // kubectl create role refuses the verb use: a command that cannot work is not offered.
  assert.not.match(message, /kubectl create/);
  // Nothing was looked up: the advice cannot depend on whether the spec exists.
  assert.is(ports.lookups.length, 0);
});

Create("a 403 for the requesting user advises a binding for that user", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true }, decide: (p) => ({ allowed: p.user !== "alice" }) });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    ports,
  );
  const message = verdict.kind === "denied" ? verdict.message : "";
  assert.match(message, /a RoleBinding gmsa-use-webapp1-credspec-user of it to user alice \(as YAML: kubectl create role does not take the verb use\)$/);
  assert.not.match(message, /npm run credspec/);
});

Create("after a 403 the webhook asks nothing more; explain's setting adds the similar names the account may use", async () => {
  const make = (suggestAfterRefusal: boolean) => {
    const ports = fakePorts({ settings: { suggestAfterRefusal }, decide: (_p, name) => ({ allowed: name === "webapp1-credspec" }) });
    return { ports, deps: { ...ports, credSpecs: { ...ports.credSpecs, knownNames: () => ["webapp1-credspec", "payroll-gmsa"] } } };
  };
  const pod = podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspex")));
  const webhook = make(false);
  const refused = await validatePod(admission("CREATE", pod), webhook.deps);
  assert.is(refused.kind === "denied" && refused.code, 403);
  assert.not.match(refused.kind === "denied" ? refused.message : "", /similar/);
  assert.equal(
    webhook.ports.reviews.map((r) => r.name),
    ["webapp1-credspex"],
    "one review: the refused name's",
  );
  const explain = make(true);
  const explained = await validatePod(admission("CREATE", pod), explain.deps);
  assert.match(
    explained.kind === "denied" ? explained.message : "",
    /; existing credential specs with similar names that service account "web" in namespace "apps" may use: "webapp1-credspec"$/,
  );
});

Create("a missing name's 422 costs the webhook no review beyond the pod's own names", async () => {
  // The account holds use of the name it gave (a grant to a spec since renamed); a review of each
  // name near it would tell, by its cost, that a spec it may not use is there.
  const ports = fakePorts({ decide: (_p, name) => ({ allowed: name === "webapp3-credspec" }) });
  const deps = { ...ports, credSpecs: { ...ports.credSpecs, knownNames: () => ["webapp1-credspec", "webapp2-credspec"] } };
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp3-credspec"))),
    ),
    deps,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 422);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /GMSACredentialSpec "webapp3-credspec" does not exist$/);
  assert.equal(
    ports.reviews.map((r) => r.name),
    ["webapp3-credspec"],
  );
});

Create("with explain's setting, a missing name's 422 lists similar existing names, only those the service account may use", async () => {
  const ports = fakePorts({ settings: { suggestAfterRefusal: true }, decide: (_p, name) => ({ allowed: name !== "webapp2-credspec" }) });
  const deps = { ...ports, credSpecs: { ...ports.credSpecs, knownNames: () => ["webapp1-credspec", "webapp2-credspec", "payroll-gmsa"] } };
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp3-credspec"))),
    ),
    deps,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 422);
  const message = verdict.kind === "denied" ? verdict.message : "";
  assert.match(
    message,
    /GMSACredentialSpec "webapp3-credspec" does not exist; existing credential specs with similar names that service account "web" in namespace "apps" may use: "webapp1-credspec"$/,
  );
  assert.not.match(message, /webapp2-credspec|payroll/);
});

Create("with explain's setting, no suggestion when no similar name is usable, the names are not known, or a review fails", async () => {
  const pod3 = podWith((p) => (p.spec.securityContext = gmsa("webapp3-credspec")));
  const settings = { suggestAfterRefusal: true };
  const refusing = fakePorts({ settings, decide: (_p, name) => ({ allowed: name === "webapp3-credspec" }) });
  const none = await validatePod(admission("CREATE", pod3), { ...refusing, credSpecs: { ...refusing.credSpecs, knownNames: () => ["webapp1-credspec"] } });
  assert.match(none.kind === "denied" ? none.message : "", /"webapp3-credspec" does not exist$/);
  const unknown = fakePorts({ settings });
  const notKnown = await validatePod(admission("CREATE", pod3), { ...unknown, credSpecs: { ...unknown.credSpecs, knownNames: () => undefined } });
  assert.match(notKnown.kind === "denied" ? notKnown.message : "", /"webapp3-credspec" does not exist$/);
  const failing = fakePorts({ settings });
  let reviews = 0;
  const failed = await validatePod(admission("CREATE", pod3), {
    ...failing,
    credSpecs: { ...failing.credSpecs, knownNames: () => ["webapp1-credspec"] },
    authorizer: {
      async mayUse() {
        if (++reviews > 1) throw new Error("the API server went away");
        return { allowed: true };
      },
    },
  });
  assert.is(failed.kind === "denied" && failed.code, 422);
  assert.match(failed.kind === "denied" ? failed.message : "", /"webapp3-credspec" does not exist$/);
});

Create("with the requesting-user check on, the requesting user must also hold use", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true }, decide: (p) => ({ allowed: p.user !== "alice" }) });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    ports,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /user "alice" is not authorized to use GMSACredentialSpec "webapp1-credspec"/);
  const asked = ports.reviews.find((r) => r.principal.user === "alice");
  assert.equal(asked?.principal.groups, ["developers"]);
  assert.is(asked?.principal.serviceAccount, undefined);
});

Create("with the requesting-user check off, the requesting user is not asked about", async () => {
  const ports = fakePorts();
  await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    ports,
  );
  assert.not.ok(ports.reviews.some((r) => r.principal.user === "alice"));
});

Create("with the requesting-user check on, a request without a user is refused", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true } });
  const verdict = await validatePod(
    admission(
      "CREATE",
      podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
      { userInfo: {} },
    ),
    ports,
  );
  assert.is(verdict.kind === "denied" && verdict.code, 403);
});

Create("allows DELETE and CONNECT without looking", async () => {
  for (const operation of ["DELETE", "CONNECT"] as const) {
    const ports = fakePorts({ decide: () => ({ allowed: false }) });
    assert.is(
      (
        await validatePod(
          admission(
            operation,
            podWith((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
          ),
          ports,
        )
      ).kind,
      "allowed",
    );
  }
});

const madeUp = (count: number) => Array.from({ length: count }, (_, i) => `made-up-${i}`);

function podNaming(names: readonly string[]): PodSpec {
  return podWith((p) => (p.spec.containers = names.map((name, i) => ({ name: `c${i}`, securityContext: gmsa(name) }))));
}

Create("a pod of made-up names costs one access review, not one per name, and no lookup", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const verdict = await validatePod(admission("CREATE", podNaming(madeUp(16))), ports);
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.match(
    verdict.kind === "denied" ? verdict.message : "",
    /^container "c0" of pod "web-0": service account "web" in namespace "apps" is not authorized to use GMSACredentialSpec "made-up-0"/,
  );
  assert.equal(
    ports.reviews.map((r) => r.name),
    ["made-up-0"],
  );
  assert.equal(ports.lookups, []);
});

Create("names are judged in order, and judging stops at the batch holding the first refusal", async () => {
  const names = madeUp(12);
  const ports = fakePorts({ decide: (_p, name) => ({ allowed: name !== "made-up-3" && name !== "made-up-4" }) });
  const verdict = await validatePod(admission("CREATE", podNaming(names)), ports);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /^container "c3" of pod "web-0": .* GMSACredentialSpec "made-up-3"/);
  // The first name alone, then the batch of four that holds the refusal; nothing after it.
  assert.equal(
    ports.reviews.map((r) => r.name),
    names.slice(0, 5),
  );
  assert.equal(ports.lookups, []);
});

Create("a pod of usable names is still asked about, and looked up, name by name", async () => {
  const names = ["webapp1-credspec", "payroll-gmsa"];
  const ports = fakePorts();
  const verdict = await validatePod(admission("CREATE", podNaming(names)), ports);
  assert.is(verdict.kind, "allowed");
  assert.equal(
    ports.reviews.map((r) => r.name),
    names,
  );
  assert.equal(ports.lookups.sort(), [...names].sort());
});

Create("with the requesting-user check on, a refused first name still ends it after one batch", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true }, decide: (p) => ({ allowed: p.user !== "alice" }) });
  const verdict = await validatePod(admission("CREATE", podNaming(madeUp(16))), ports);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /user "alice" is not authorized to use GMSACredentialSpec "made-up-0"/);
  assert.equal(
    ports.reviews.map((r) => [r.principal.user, r.name]),
    [
      ["system:serviceaccount:apps:web", "made-up-0"],
      ["alice", "made-up-0"],
    ],
  );
});

Create("no more than a batch of names is asked about at once", async () => {
  let inFlight = 0;
  let most = 0;
  const ports = fakePorts();
  ports.authorizer = {
    async mayUse() {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      inFlight--;
      return { allowed: true };
    },
  };
  await validatePod(admission("CREATE", podNaming(madeUp(16))), ports);
  assert.is(most, 4);
});

Create.run();
