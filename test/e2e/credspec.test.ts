import { suite } from "uvu";
import * as assert from "uvu/assert";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { credSpecFile } from "../lib/credspec/credSpecFixtures.js";

/**
 * Credential specs through a real kube-apiserver: it sends every create and update of a
 * GMSACredentialSpec to the credential spec webhook, returns its refusal to the client and
 * passes its warnings on as Warning headers, which kubectl prints.
 */
const E2e = suite<{ cluster: E2eCluster }>("credential specs end to end");

E2e.before(async (context) => {
  try {
    context.cluster = await startE2eCluster();
  } catch (error) {
    console.error("end-to-end set-up failed:", error);
    throw error;
  }
});

E2e.after(async (context) => {
  await context.cluster?.close();
});

const collection = (version = "v1") => `/apis/windows.k8s.io/${version}/gmsacredentialspecs`;

E2e("a broken credential spec is refused at create, the field and the fault named", async ({ cluster }) => {
  const object = credSpecFile("domain-joined.yaml");
  object.metadata.name = "broken-sid";
  object.credspec.DomainJoinConfig.Sid = "S-1-5-21-2126729477";
  const reply = await kubeRequest(cluster.admin, "POST", collection(), object);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "credspec\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.match(reply.body.message, /GMSACredentialSpec "broken-sid" is not a valid Windows credential spec: credspec\.DomainJoinConfig\.Sid: must be a domain SID/);
  const lookup = await kubeRequest(cluster.admin, "GET", `${collection()}/broken-sid`);
  assert.is(lookup.status, 404);
});

E2e("the v1alpha1 form is refused the same way", async ({ cluster }) => {
  const object = { ...credSpecFile("aks-keyvault.yaml"), apiVersion: "windows.k8s.io/v1alpha1" };
  object.metadata.name = "old-form";
  object.credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts = [];
  const reply = await kubeRequest(cluster.admin, "POST", collection("v1alpha1"), object);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /credspec\.ActiveDirectoryConfig\.GroupManagedServiceAccounts: must be a non-empty list/);
});

E2e("a suspicious credential spec is created, and the client is shown each warning", async ({ cluster }) => {
  const object = credSpecFile("domain-joined.yaml");
  object.metadata.name = "one-scope";
  object.credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts.pop();
  object.credspec.DomainJoinConfig.NetBiosName = "contoso";
  const reply = await kubeRequest(cluster.admin, "POST", collection(), object);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.ok(reply.warnings.some((w) => /GMSACredentialSpec "one-scope": credspec\.ActiveDirectoryConfig\.GroupManagedServiceAccounts: no entry has DomainJoinConfig\.NetBiosName/.test(w)), JSON.stringify(reply.warnings));
  assert.ok(reply.warnings.some((w) => /credspec\.DomainJoinConfig\.NetBiosName: is not upper case/.test(w)), JSON.stringify(reply.warnings));
});

E2e("a change that breaks an existing credential spec is refused; a label on a broken old one is not", async ({ cluster }) => {
  const broken = await kubeRequest(cluster.admin, "PATCH", `${collection()}/webapp1-credspec`, { credspec: { DomainJoinConfig: { Guid: "{244818ae-87ca-4fcd-92ec-e79e5252348a}" } } }, "application/merge-patch+json");
  assert.is(broken.status, 422, JSON.stringify(broken.body));
  assert.match(broken.body.message, /credspec\.DomainJoinConfig\.Guid: must be a GUID without braces/);
  const labelled = await kubeRequest(cluster.admin, "PATCH", `${collection()}/empty-credspec`, { metadata: { labels: { team: "payroll" } } }, "application/merge-patch+json");
  assert.is(labelled.status, 200, JSON.stringify(labelled.body));
});

E2e.run();
