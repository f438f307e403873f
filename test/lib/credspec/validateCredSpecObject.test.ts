import { suite } from "uvu";
import * as assert from "uvu/assert";
import { randomUUID } from "node:crypto";
import { handleReview, type ReviewBudget } from "../../../lib/admission/handleReview.js";
import { validateCredSpecObject } from "../../../lib/credspec/validateCredSpecObject.js";
import { credSpecFile } from "./credSpecFixtures.js";

function deps(): ReviewBudget {
  // The credential spec webhook needs no port: the budget is all it is handed.
  return { budgetMs: 2000 };
}

function credSpecReview(operation: string, object: unknown, oldObject?: unknown, kind = { group: "windows.k8s.io", version: "v1", kind: "GMSACredentialSpec" }) {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: randomUUID(),
      kind,
      resource: { group: "windows.k8s.io", version: "v1", resource: "gmsacredentialspecs" },
      operation,
      name: (object as { metadata?: { name?: string } } | undefined)?.metadata?.name ?? "",
      object,
      ...(oldObject === undefined ? {} : { oldObject }),
      userInfo: { username: "admin" },
    },
  };
}

async function answer(body: unknown) {
  const outcome = await handleReview(body, validateCredSpecObject, deps());
  if (outcome.kind !== "reviewed") throw new Error(outcome.message);
  return outcome;
}

const Webhook = suite("validate-credspec");

for (const file of ["domain-joined.yaml", "aks-keyvault.yaml", "eks-domainless.yaml"]) {
  Webhook(`admits ${file} without warnings`, async () => {
    const { review } = await answer(credSpecReview("CREATE", credSpecFile(file)));
    assert.equal(review.response, { uid: review.response.uid, allowed: true, auditAnnotations: { credspecs: credSpecFile(file).metadata.name } });
  });
}

Webhook("refuses a broken spec with 422 naming the object, each field and what is wrong", async () => {
  const object = credSpecFile("domain-joined.yaml");
  object.credspec.DomainJoinConfig.Sid = "S-1-5-21-2126729477";
  object.credspec.DomainJoinConfig.NetBiosName = "CONTOSO-WORLDWIDE";
  const { review, record } = await answer(credSpecReview("CREATE", object));
  assert.is(review.response.allowed, false);
  assert.is(review.response.status?.code, 422);
  assert.is(review.response.status?.reason, "Invalid");
  const message = review.response.status?.message ?? "";
  assert.match(message, /^GMSACredentialSpec "webapp1-credspec" is not a valid Windows credential spec: /);
  assert.match(message, /credspec\.DomainJoinConfig\.Sid: must be a domain SID/);
  assert.match(message, /credspec\.DomainJoinConfig\.NetBiosName: must be a NetBIOS name/);
  assert.not.match(message, /2126729477|WORLDWIDE/);
  assert.is(record.decision, "denied");
  assert.not.match(JSON.stringify(record), /2126729477|WORLDWIDE/);
});

Webhook("refuses a spec larger than admission reads with 422, on CREATE and on an UPDATE that grows it; one that only keeps it may change its metadata", async () => {
  const object = credSpecFile("domain-joined.yaml");
  const padded = { ...object, credspec: { ...object.credspec, Padding: Array.from({ length: 100_000 }, () => ({})) } };
  for (const [operation, old] of [
    ["CREATE", undefined],
    ["UPDATE", object],
  ] as const) {
    const { review } = await answer(credSpecReview(operation, padded, old));
    assert.is(review.response.allowed, false, operation);
    assert.is(review.response.status?.code, 422);
    assert.match(review.response.status?.message ?? "", /^GMSACredentialSpec "webapp1-credspec" takes more than 256 KiB as JSON/);
  }
  // Its finalizers and labels stay manageable: the spec is unusable either way, not worse.
  const labelled = { ...padded, metadata: { ...padded.metadata, labels: { team: "a" } } };
  assert.is((await answer(credSpecReview("UPDATE", labelled, padded))).review.response.allowed, true);
  // Under the bound, the same padding is judged as any spec is.
  const small = { ...object, credspec: { ...object.credspec, Padding: [{}] } };
  assert.not.match((await answer(credSpecReview("CREATE", small))).review.response.status?.message ?? "", /KiB/);
});

/** A review as JSON.parse makes it from the API server's bytes: "__proto__" stays an ordinary key there. */
function parsedReview(text: string): unknown {
  return JSON.parse(text);
}

Webhook("refuses a spec whose keys exist only under __proto__, or that carries constructor or prototype keys, with 422 naming each", async () => {
  const spec = credSpecFile("domain-joined.yaml");
  const cases = [
    {
      object: `{"apiVersion":"windows.k8s.io/v1","kind":"GMSACredentialSpec","metadata":{"name":"hidden"},"credspec":{"__proto__":${JSON.stringify(spec.credspec)}}}`,
      path: "credspec.__proto__",
    },
    {
      object: JSON.stringify({ ...spec, credspec: { ...spec.credspec, DomainJoinConfig: { ...spec.credspec.DomainJoinConfig, constructor: { prototype: {} } } } }),
      path: "credspec.DomainJoinConfig.constructor",
    },
    {
      object: JSON.stringify(spec).replace('"GroupManagedServiceAccounts":[{', '"GroupManagedServiceAccounts":[{"prototype":1,'),
      path: "credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts[0].prototype",
    },
  ];
  for (const { object, path } of cases) {
    assert.ok(
      object.includes(
        path
          .split(".")
          .at(-1)!
          .replace(/\[0\]$/, ""),
      ),
      path,
    );
    const review = parsedReview(JSON.stringify(credSpecReview("CREATE", {})).replace('"object":{}', `"object":${object}`));
    const { review: answered } = await answer(review);
    assert.is(answered.response.allowed, false, path);
    assert.is(answered.response.status?.code, 422, path);
    assert.ok((answered.response.status?.message ?? "").includes(`${path}: is a reserved key`), answered.response.status?.message);
  }
});

Webhook("a credential spec nested many thousands of levels deep is judged, not a failure of the webhook", async () => {
  const spec = credSpecFile("domain-joined.yaml");
  // Deeper than recursion goes: refused for its depth, counted without recursion. Within what
  // admission reads: judged field by field.
  for (const [depth, inner, expected] of [
    [50_000, "{}", "or nests more than 64 levels"],
    [50_000, '{"__proto__":{}}', "or nests more than 64 levels"],
    [50, "{}", undefined],
    [50, '{"__proto__":{}}', ".__proto__: is a reserved key"],
  ] as const) {
    const deep = `${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`;
    const object = JSON.stringify(spec).replace('"CmsPlugins":', `"Deep":${deep},"CmsPlugins":`);
    const { review } = await answer(parsedReview(JSON.stringify(credSpecReview("CREATE", {})).replace('"object":{}', `"object":${object}`)));
    assert.is.not(review.response.status?.code, 500, review.response.status?.message);
    if (expected !== undefined) {
      assert.is(review.response.status?.code, 422);
      assert.ok((review.response.status?.message ?? "").includes(expected), review.response.status?.message?.slice(0, 300));
      assert.ok((review.response.status?.message ?? "").length < 1000, "the message names the place in a few levels");
    }
  }
});

Webhook("a plug-in input of a password-like word and a long run of spaces is judged within the admission budget", async () => {
  // The password check once backtracked over two adjacent runs of white space: 100 000 spaces cost
  // about ten seconds of one instance's CPU, and a whole body of them hours.
  const spec = credSpecFile("aks-keyvault.yaml");
  spec.credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput = `pwd${" ".repeat(100_000)}x`;
  const started = performance.now();
  const { review } = await answer(credSpecReview("CREATE", spec));
  const elapsed = performance.now() - started;
  assert.is(review.response.allowed, true);
  assert.ok(elapsed < deps().budgetMs, `answered after ${elapsed.toFixed(0)} ms, budget ${deps().budgetMs} ms`);
  // The same words still warn when they carry a value.
  spec.credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput = `user=a; pwd ${" ".repeat(1000)}' = secret`;
  const { review: warned } = await answer(credSpecReview("CREATE", spec));
  assert.ok(
    (warned.response.warnings ?? []).some((w) => w.includes("appears to carry a password inline")),
    JSON.stringify(warned.response.warnings),
  );
});

Webhook("refuses an object without credspec", async () => {
  const { review } = await answer(credSpecReview("CREATE", credSpecFile("no-credspec.yaml")));
  assert.is(review.response.status?.code, 422);
  assert.match(review.response.status?.message ?? "", /credspec: is required/);
});

Webhook("admits a suspicious spec with one warning per finding, each naming the object and field", async () => {
  const object = credSpecFile("aks-keyvault.yaml");
  object.credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput = "User=svc;Password=TopSecret1";
  object.credspec.DomainJoinConfig.Sid += "-1105";
  const { review } = await answer(credSpecReview("CREATE", object));
  assert.is(review.response.allowed, true);
  const warnings = review.response.warnings ?? [];
  assert.is(warnings.length, 2, JSON.stringify(warnings));
  assert.ok(warnings.every((w) => w.startsWith('GMSACredentialSpec "payroll-gmsa": credspec.')));
  assert.not.match(JSON.stringify(review), /TopSecret1/);
});

Webhook("checks an UPDATE that changes credspec", async () => {
  const old = credSpecFile("domain-joined.yaml");
  const changed = credSpecFile("domain-joined.yaml");
  changed.credspec.DomainJoinConfig.Guid = "not-a-guid";
  const { review } = await answer(credSpecReview("UPDATE", changed, old));
  assert.is(review.response.status?.code, 422);
  assert.match(review.response.status?.message ?? "", /credspec\.DomainJoinConfig\.Guid/);
});

Webhook("admits an UPDATE that leaves credspec as it was, broken or not (labels, finalizers of old objects)", async () => {
  const old = credSpecFile("no-credspec.yaml");
  const labelled = { ...credSpecFile("no-credspec.yaml"), metadata: { name: "empty-credspec", labels: { team: "a" } } };
  const { review } = await answer(credSpecReview("UPDATE", labelled, old));
  assert.is(review.response.allowed, true);
});

Webhook("the v1alpha1 form is judged the same", async () => {
  const object = { ...credSpecFile("domain-joined.yaml"), apiVersion: "windows.k8s.io/v1alpha1" };
  delete object.credspec.CmsPlugins;
  const { review } = await answer(credSpecReview("CREATE", object, undefined, { group: "windows.k8s.io", version: "v1alpha1", kind: "GMSACredentialSpec" }));
  assert.is(review.response.status?.code, 422);
  assert.match(review.response.status?.message ?? "", /credspec\.CmsPlugins: is required/);
});

Webhook("refuses with 400 anything that is not a GMSACredentialSpec", async () => {
  const { review } = await answer(credSpecReview("CREATE", { apiVersion: "v1", kind: "Pod", metadata: { name: "p" } }, undefined, { group: "", version: "v1", kind: "Pod" }));
  assert.is(review.response.status?.code, 400);
  assert.match(review.response.status?.message ?? "", /expected a GMSACredentialSpec/);
  const notAnObject = await answer(credSpecReview("CREATE", "credspec"));
  assert.is(notAnObject.review.response.status?.code, 400);
});

Webhook.run();
