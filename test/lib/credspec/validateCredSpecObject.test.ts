import { suite } from "uvu";
import * as assert from "uvu/assert";
import { randomUUID } from "node:crypto";
import { handleReview, type ReviewDependencies } from "../../../lib/admission/handleReview.js";
import { validateCredSpecObject } from "../../../lib/credspec/validateCredSpecObject.js";
import { fakePorts } from "../../support/fakePorts.js";
import { credSpecFile } from "./credSpecFixtures.js";

function deps(): ReviewDependencies {
  const ports = fakePorts();
  return { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 2000 };
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
