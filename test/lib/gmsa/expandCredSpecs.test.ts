import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../../lib/gmsa/canonicalJson.js";
import { expandCredSpecs, randomHostname } from "../../../lib/gmsa/expandCredSpecs.js";
import type { PatchOperation } from "../../../lib/webhook/jsonPatch.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { admission, fakePorts } from "../../support/fakePorts.js";
import { credSpecFixture } from "../../support/fixtures.js";
import { gmsa, pod, type PodSpec } from "../../support/reviews.js";

const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const payroll = canonicalJson(credSpecFixture("payroll-gmsa").credspec);

function withPlaces(edit: (p: PodSpec) => void): PodSpec {
  const p = pod();
  edit(p);
  return p;
}

const Expand = suite("expandCredSpecs");

const places: Array<[string, (p: PodSpec) => void, PatchOperation[]]> = [
  ["pod level", (p) => (p.spec.securityContext = gmsa("webapp1-credspec")), [{ op: "add", path: "/spec/securityContext/windowsOptions/gmsaCredentialSpec", value: webapp }]],
  [
    "a container",
    (p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec")),
    [{ op: "add", path: "/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec", value: webapp }],
  ],
  [
    "an init container",
    (p) => (p.spec.initContainers = [{ name: "setup", securityContext: gmsa("payroll-gmsa") }]),
    [{ op: "add", path: "/spec/initContainers/0/securityContext/windowsOptions/gmsaCredentialSpec", value: payroll }],
  ],
  [
    "an ephemeral container in a created pod",
    (p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("payroll-gmsa") }]),
    [{ op: "add", path: "/spec/ephemeralContainers/0/securityContext/windowsOptions/gmsaCredentialSpec", value: payroll }],
  ],
  [
    "every level at once, the second container only",
    (p) => {
      p.spec.securityContext = gmsa("webapp1-credspec");
      p.spec.containers.push({ name: "sidecar", securityContext: gmsa("payroll-gmsa") });
      p.spec.initContainers = [{ name: "setup", securityContext: gmsa("webapp1-credspec") }];
    },
    [
      { op: "add", path: "/spec/securityContext/windowsOptions/gmsaCredentialSpec", value: webapp },
      { op: "add", path: "/spec/containers/1/securityContext/windowsOptions/gmsaCredentialSpec", value: payroll },
      { op: "add", path: "/spec/initContainers/0/securityContext/windowsOptions/gmsaCredentialSpec", value: webapp },
    ],
  ],
  [
    "the pod's alpha annotation",
    (p) => (p.metadata.annotations = { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" }),
    [{ op: "add", path: "/metadata/annotations/pod.alpha.windows.kubernetes.io~1gmsa-credential-spec", value: webapp }],
  ],
  [
    "a container's alpha annotation",
    (p) => (p.metadata.annotations = { "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" }),
    [{ op: "add", path: "/metadata/annotations/iis.container.alpha.windows.kubernetes.io~1gmsa-credential-spec", value: payroll }],
  ],
];

for (const [where, edit, expected] of places) {
  Expand(`inlines the named credential spec at ${where}`, async () => {
    const verdict = await expandCredSpecs(admission("CREATE", withPlaces(edit)), fakePorts());
    assert.is(verdict.kind, "allowed");
    assert.equal(verdict.kind === "allowed" && verdict.patch, expected);
  });
}

Expand("looks each distinct name up once, however many places name it", async () => {
  const ports = fakePorts();
  const p = withPlaces((p) => {
    p.spec.securityContext = gmsa("webapp1-credspec");
    p.spec.containers.push({ name: "b", securityContext: gmsa("webapp1-credspec") }, { name: "c", securityContext: gmsa("webapp1-credspec") });
  });
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.equal(ports.lookups, ["webapp1-credspec"]);
  assert.is(verdict.kind === "allowed" && verdict.patch.length, 3);
});

Expand("leaves contents that are already present alone, for validation to compare", async () => {
  const ports = fakePorts();
  const p = withPlaces((p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec", '{"preset":true}')));
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(ports.lookups, []);
});

Expand("without any GMSA setting: allowed, no patch, no lookup", async () => {
  const ports = fakePorts();
  const verdict = await expandCredSpecs(admission("CREATE", pod()), ports);
  assert.equal(verdict, { kind: "allowed", patch: [], warnings: [], credSpecs: [] });
  assert.equal(ports.lookups, []);
});

Expand("warns once per alpha annotation, naming the field that replaces it", async () => {
  const p = withPlaces((p) => {
    p.metadata.annotations = {
      "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec",
      "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa",
      "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec": payroll,
      "unrelated.example.com/gmsa-credential-spec-name": "ignored",
    };
  });
  const verdict = await expandCredSpecs(admission("CREATE", p), fakePorts());
  assert.equal(verdict.warnings, [
    'pod "web-0": annotation pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name is deprecated; use spec.securityContext.windowsOptions.gmsaCredentialSpecName instead',
    'container "iis" of pod "web-0": annotation iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name is deprecated; use spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpecName instead',
    'container "iis" of pod "web-0": annotation iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec is deprecated; use spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpec instead',
  ]);
  assert.equal(verdict.kind === "allowed" && verdict.patch.map((o) => o.path), ["/metadata/annotations/pod.alpha.windows.kubernetes.io~1gmsa-credential-spec"]);
});

for (const [what, edit] of [
  ["a credential spec that does not exist", (p: PodSpec) => (p.spec.containers[0]!.securityContext = gmsa("missing"))],
  ["a credential spec without a credspec object", (p: PodSpec) => (p.spec.securityContext = gmsa("empty-credspec"))],
] as const) {
  Expand(`leaves ${what} for validation, which judges use before existence`, async () => {
    const verdict = await expandCredSpecs(admission("CREATE", withPlaces(edit)), fakePorts());
    assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  });
}

Expand("still inlines the names that resolve when another does not", async () => {
  const p = withPlaces((p) => {
    p.spec.securityContext = gmsa("missing");
    p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  });
  const verdict = await expandCredSpecs(admission("CREATE", p), fakePorts());
  assert.equal(verdict.kind === "allowed" && verdict.patch.map((o) => o.path), ["/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec"]);
});

const refusals: Array<[string, (p: PodSpec) => void, number, RegExp]> = [
  [
    "a name that is not a valid object name",
    (p) => (p.spec.initContainers = [{ name: "setup", securityContext: gmsa("../secrets") }]),
    422,
    /init container "setup" of pod "web-0": "\.\.\/secrets" .* is not a valid GMSACredentialSpec name/,
  ],
];
for (const [what, edit, code, message] of refusals) {
  Expand(`refuses ${what} with ${code}`, async () => {
    const ports = fakePorts();
    const verdict = await expandCredSpecs(admission("CREATE", withPlaces(edit)), ports);
    assert.is(verdict.kind, "denied");
    if (verdict.kind !== "denied") return;
    assert.is(verdict.code, code);
    assert.match(verdict.message, message);
  });
}

Expand("never sends an invalid name to the API server", async () => {
  const ports = fakePorts();
  await expandCredSpecs(
    admission(
      "CREATE",
      withPlaces((p) => (p.spec.securityContext = gmsa("Bad/Name"))),
    ),
    ports,
  );
  assert.equal(ports.lookups, []);
});

Expand("on UPDATE inlines only the ephemeral containers the update adds", async () => {
  const before = withPlaces((p) => (p.spec.ephemeralContainers = [{ name: "old", securityContext: gmsa("webapp1-credspec", webapp) }]));
  const after = withPlaces((p) => {
    p.spec.ephemeralContainers = [
      { name: "old", securityContext: gmsa("webapp1-credspec", webapp) },
      { name: "debug", securityContext: gmsa("payroll-gmsa") },
    ];
  });
  const verdict = await expandCredSpecs(admission("UPDATE", after, { oldPod: before as never, subResource: "ephemeralcontainers" }), fakePorts());
  assert.equal(verdict.kind === "allowed" && verdict.patch, [{ op: "add", path: "/spec/ephemeralContainers/1/securityContext/windowsOptions/gmsaCredentialSpec", value: payroll }]);
});

Expand("on an ordinary UPDATE changes nothing", async () => {
  const p = withPlaces((p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const ports = fakePorts();
  const verdict = await expandCredSpecs(admission("UPDATE", p, { oldPod: p as never }), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(ports.lookups, []);
});

const hostnameWarning = /longer than 15 characters, and Windows uses only its first 15 as the NetBIOS name/;
const warningsOf = (verdict: Awaited<ReturnType<typeof expandCredSpecs>>) => (verdict.kind === "allowed" ? (verdict.warnings ?? []) : []);

Expand("a GMSA pod of a workload whose hostname passes 15 characters is warned: its replicas would share one NetBIOS name", async () => {
  const replica = withPlaces((p) => {
    p.metadata = { generateName: "webapp-7d9c8b5f6-", namespace: "apps" } as PodSpec["metadata"];
    p.spec.securityContext = gmsa("webapp1-credspec");
  });
  const warned = warningsOf(await expandCredSpecs(admission("CREATE", replica), fakePorts()));
  assert.equal(warned.filter((w) => hostnameWarning.test(w)).length, 1, warned.join("\n"));
  assert.match(
    warned.find((w) => hostnameWarning.test(w))!,
    /gMSA "webapp1-credspec"/,
  );

  const stateful = withPlaces((p) => {
    p.metadata = { name: "payroll-database-0", namespace: "apps", ownerReferences: [{ kind: "StatefulSet", controller: true }] } as PodSpec["metadata"];
    p.spec.securityContext = gmsa("webapp1-credspec");
  });
  assert.ok(
    warningsOf(await expandCredSpecs(admission("CREATE", stateful), fakePorts())).some((w) => hostnameWarning.test(w)),
    "a StatefulSet's pods too",
  );
});

Expand("no hostname warning for a short hostname, a pod of its own, a pod without GMSA, or with GMSA_RANDOM_HOSTNAME", async () => {
  const cases: PodSpec[] = [
    withPlaces((p) => {
      p.metadata = { generateName: "web-", namespace: "apps" } as PodSpec["metadata"];
      p.spec.securityContext = gmsa("webapp1-credspec");
    }),
    withPlaces((p) => {
      p.metadata = { generateName: "webapp-7d9c8b5f6-", namespace: "apps" } as PodSpec["metadata"];
      p.spec.hostname = "web";
      p.spec.securityContext = gmsa("webapp1-credspec");
    }),
    withPlaces((p) => {
      p.metadata = { name: "a-pod-of-its-own-with-a-long-name", namespace: "apps" } as PodSpec["metadata"];
      p.spec.securityContext = gmsa("webapp1-credspec");
    }),
    withPlaces((p) => (p.metadata = { generateName: "webapp-7d9c8b5f6-", namespace: "apps" } as PodSpec["metadata"])),
  ];
  for (const candidate of cases)
    assert.not.ok(
      warningsOf(await expandCredSpecs(admission("CREATE", candidate), fakePorts())).some((w) => hostnameWarning.test(w)),
      JSON.stringify(candidate.metadata),
    );
  const replica = withPlaces((p) => {
    p.metadata = { generateName: "webapp-7d9c8b5f6-", namespace: "apps" } as PodSpec["metadata"];
    p.spec.securityContext = gmsa("webapp1-credspec");
  });
  assert.not.ok(warningsOf(await expandCredSpecs(admission("CREATE", replica), fakePorts({ settings: { randomHostname: true } }))).some((w) => hostnameWarning.test(w)));
});

Expand("with GMSA_RANDOM_HOSTNAME gives a GMSA pod without a hostname a random one", async () => {
  const p = withPlaces((p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const verdict = await expandCredSpecs(admission("CREATE", p), fakePorts({ settings: { randomHostname: true } }));
  const op = verdict.kind === "allowed" ? verdict.patch.find((o) => o.path === "/spec/hostname") : undefined;
  assert.ok(op, "a hostname is added");
  assert.match(String(op!.value), /^[a-z][a-z0-9]{14}$/);
});

Expand("keeps a hostname that is set, and leaves non-GMSA pods alone", async () => {
  const ports = fakePorts({ settings: { randomHostname: true } });
  const named = withPlaces((p) => {
    p.spec.securityContext = gmsa("webapp1-credspec");
    p.spec.hostname = "web";
  });
  const a = await expandCredSpecs(admission("CREATE", named), ports);
  const b = await expandCredSpecs(admission("CREATE", pod()), ports);
  assert.not.ok(a.kind === "allowed" && a.patch.some((o) => o.path === "/spec/hostname"));
  assert.equal(b.kind === "allowed" && b.patch, []);
});

Expand("random hostnames differ from one another", () => {
  const names = new Set(Array.from({ length: 200 }, randomHostname));
  assert.is(names.size, 200);
});

const Use = suite("expandCredSpecs: only for principals that may use the spec");

const onlyFor = (allowedName: string) => (_: unknown, name: string) => ({ allowed: name === allowedName });

Use("asks about the pod's service account, as validation does, before looking anything up", async () => {
  const ports = fakePorts();
  const p = withPlaces((p) => {
    p.spec.serviceAccountName = "web";
    p.spec.securityContext = gmsa("webapp1-credspec");
  });
  await expandCredSpecs(admission("CREATE", p), ports);
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

Use("inlines nothing, and looks nothing up, for a name the service account may not use", async () => {
  const ports = fakePorts({ decide: onlyFor("webapp1-credspec") });
  const p = withPlaces((p) => {
    p.spec.securityContext = gmsa("webapp1-credspec");
    p.spec.containers[0]!.securityContext = gmsa("payroll-gmsa");
  });
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, [{ op: "add", path: "/spec/securityContext/windowsOptions/gmsaCredentialSpec", value: webapp }]);
  assert.equal(ports.lookups, ["webapp1-credspec"]);
});

Use("answers a principal without use the same for a spec that exists and one that does not", async () => {
  const answers = [];
  for (const name of ["payroll-gmsa", "no-such-spec"]) {
    const ports = fakePorts({ decide: () => ({ allowed: false }) });
    const p = withPlaces((p) => (p.spec.securityContext = gmsa(name)));
    const verdict = await expandCredSpecs(admission("CREATE", p), ports);
    assert.equal(ports.lookups, []);
    // The log's reason names the spec; apart from the name, both answers read the same.
    const unchanged = verdict.kind === "allowed" ? verdict.unchanged?.replace(name, "<name>") : undefined;
    answers.push({ ...verdict, credSpecs: [], unchanged });
  }
  assert.equal(answers[0], answers[1]);
  assert.equal(answers[0], {
    kind: "allowed",
    patch: [],
    warnings: [],
    credSpecs: [],
    unchanged: 'nothing inlined: "<name>" (use not confirmed); the validating webhook decides',
  });
});

Use("says, for the log, why nothing was inlined: a name whose use is confirmed but that does not exist", async () => {
  const ports = fakePorts();
  const p = withPlaces((p) => (p.spec.securityContext = gmsa("no-such-spec")));
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.is(verdict.kind === "allowed" && verdict.unchanged, 'nothing inlined: "no-such-spec" (does not exist); the validating webhook decides');
  const inlined = await expandCredSpecs(
    admission(
      "CREATE",
      withPlaces((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    fakePorts(),
  );
  assert.is(inlined.kind === "allowed" && inlined.unchanged, undefined, "a pod whose spec was inlined is not unchanged");
});

Use("with the requesting-user check on, inlines only what the requesting user may use too", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true }, decide: (p, name) => ({ allowed: p.user !== "alice" || name === "webapp1-credspec" }) });
  const p = withPlaces((p) => {
    p.spec.securityContext = gmsa("webapp1-credspec");
    p.spec.initContainers = [{ name: "setup", securityContext: gmsa("payroll-gmsa") }];
  });
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch.map((o) => o.path), ["/spec/securityContext/windowsOptions/gmsaCredentialSpec"]);
  assert.ok(ports.reviews.some((r) => r.principal.user === "alice" && r.principal.serviceAccount === undefined));
  assert.equal(ports.lookups, ["webapp1-credspec"]);
});

Use("with the requesting-user check on, a request that names no user gets nothing inlined", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true } });
  const p = withPlaces((p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const verdict = await expandCredSpecs(admission("CREATE", p, { userInfo: {} }), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(ports.lookups, []);
});

Use("an ephemeral container added by an UPDATE gets contents only if the service account may use them", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const after = withPlaces((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("payroll-gmsa") }]));
  const verdict = await expandCredSpecs(admission("UPDATE", after, { oldPod: pod() as never, subResource: "ephemeralcontainers" }), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(ports.lookups, []);
});

Use("an ephemeral container added by an UPDATE is judged for the account the pod runs as, not one the sent object names", async () => {
  // Only "privileged" may use the spec; the pod runs as "web". The API server would put the
  // account back after mutation, but contents inlined by then are already in the request.
  const ports = fakePorts({ decide: (principal) => ({ allowed: principal.serviceAccount?.name === "privileged" }) });
  const before = withPlaces((p) => (p.spec.serviceAccountName = "web"));
  const swapped = withPlaces((p) => {
    p.spec.serviceAccountName = "privileged";
    p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("payroll-gmsa") }];
  });
  const verdict = await expandCredSpecs(admission("UPDATE", swapped, { oldPod: before as never, subResource: "ephemeralcontainers" }), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(ports.lookups, []);
  assert.equal(
    ports.reviews.map((r) => r.principal.serviceAccount?.name),
    ["web"],
  );
  // The same update from a pod that does run as "privileged" gets its contents.
  const runsPrivileged = withPlaces((p) => (p.spec.serviceAccountName = "privileged"));
  const granted = await expandCredSpecs(admission("UPDATE", swapped, { oldPod: runsPrivileged as never, subResource: "ephemeralcontainers" }), ports);
  assert.equal(granted.kind === "allowed" && granted.patch.map((o) => o.path), ["/spec/ephemeralContainers/0/securityContext/windowsOptions/gmsaCredentialSpec"]);
});

Use("a decision the cache already holds costs validation no second review", async () => {
  const asked: string[] = [];
  const ports = fakePorts();
  const cached = new Map<string, boolean>();
  ports.authorizer = {
    async mayUse(principal, namespace, name) {
      const key = `${principal.user}|${namespace}|${name}`;
      if (!cached.has(key)) {
        asked.push(key);
        cached.set(key, true);
      }
      return { allowed: cached.get(key)! };
    },
  };
  const p = withPlaces((p) => (p.spec.securityContext = gmsa("webapp1-credspec")));
  const mutated = await expandCredSpecs(admission("CREATE", p), ports);
  const contents = mutated.kind === "allowed" ? String(mutated.patch[0]?.value) : "";
  p.spec.securityContext = gmsa("webapp1-credspec", contents);
  assert.is((await validatePod(admission("CREATE", p), ports)).kind, "allowed");
  assert.equal(asked, ["system:serviceaccount:apps:default|apps|webapp1-credspec"]);
});

Use("a pod of made-up names costs one access review and no lookup", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const p = withPlaces((p) => (p.spec.containers = Array.from({ length: 16 }, (_, i) => ({ name: `c${i}`, securityContext: gmsa(`made-up-${i}`) }))));
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
  assert.equal(
    ports.reviews.map((r) => r.name),
    ["made-up-0"],
  );
  assert.equal(ports.lookups, []);
});

Use("stops asking at the first refusal and inlines only what was confirmed before it", async () => {
  const names = ["webapp1-credspec", "payroll-gmsa", "made-up-a", "webapp1-credspec", "made-up-b", "made-up-c", "made-up-d", "made-up-e"];
  const ports = fakePorts({ decide: (_p, name) => ({ allowed: !name.startsWith("made-up-a") }) });
  const p = withPlaces((p) => (p.spec.containers = names.map((name, i) => ({ name: `c${i}`, securityContext: gmsa(name) }))));
  const verdict = await expandCredSpecs(admission("CREATE", p), ports);
  // Distinct names in order: webapp1 alone, then payroll, made-up-a (refused), made-up-b, made-up-c.
  assert.equal(
    ports.reviews.map((r) => r.name),
    ["webapp1-credspec", "payroll-gmsa", "made-up-a", "made-up-b", "made-up-c"],
  );
  assert.equal(verdict.kind === "allowed" && verdict.patch.map((o) => o.path), [
    "/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec",
    "/spec/containers/1/securityContext/windowsOptions/gmsaCredentialSpec",
    "/spec/containers/3/securityContext/windowsOptions/gmsaCredentialSpec",
  ]);
  assert.equal(ports.lookups.sort(), ["payroll-gmsa", "webapp1-credspec"]);
});

Expand.run();
Use.run();
