import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterManifests } from "../../cluster/manifests.js";
import { webhookFlowSchema, webhookPriorityLevel } from "../../cluster/webhookFlowSchema.js";

const FlowControl = suite("the API priority level of the webhook's own calls");

FlowControl("routes the webhook identity's access reviews and credential spec reads to a level of its own", () => {
  const schema = webhookFlowSchema({ kind: "User", name: "0000-identity" });
  assert.is(schema.spec.priorityLevelConfiguration.name, webhookPriorityLevel().metadata.name);
  const [rule] = schema.spec.rules;
  assert.equal(rule!.subjects, [{ kind: "User", user: { name: "0000-identity" } }]);
  const routed = rule!.resourceRules.flatMap((r) => r.resources.flatMap((resource) => r.verbs.map((verb) => `${verb} ${r.apiGroups[0]}/${resource}`)));
  assert.equal(routed.sort(), [
    "create authorization.k8s.io/localsubjectaccessreviews",
    "create authorization.k8s.io/subjectaccessreviews",
    "get windows.k8s.io/gmsacredentialspecs",
    "list windows.k8s.io/gmsacredentialspecs",
    "watch windows.k8s.io/gmsacredentialspecs",
  ]);
});

FlowControl("is matched before the built-in schemas that pod creates fall into", () => {
  const precedence = webhookFlowSchema({ kind: "User", name: "x" }).spec.matchingPrecedence;
  // service-accounts is 9000 and global-default 9900; exempt and system levels stay ahead.
  assert.ok(precedence > 1 && precedence < 9000, String(precedence));
});

FlowControl("names a service account subject as one", () => {
  const schema = webhookFlowSchema({ kind: "ServiceAccount", name: "gmsa", namespace: "gmsa-admission" });
  assert.equal(schema.spec.rules[0]!.subjects, [{ kind: "ServiceAccount", serviceAccount: { namespace: "gmsa-admission", name: "gmsa" } }]);
});

FlowControl("keeps its seats: a busy cluster cannot borrow them while pods wait on the webhook", () => {
  const level = webhookPriorityLevel();
  assert.is(level.spec.type, "Limited");
  assert.is(level.spec.limited.lendablePercent, 0);
});

FlowControl("is installed in every mode, before the webhook configurations", () => {
  for (const target of [{ kind: "url", baseUrl: "https://f.example" }] as const) {
    const kinds = clusterManifests({ target, subject: { kind: "User", name: "x" } }).map((o) => o.kind);
    assert.ok(kinds.indexOf("FlowSchema") >= 0 && kinds.indexOf("FlowSchema") < kinds.indexOf("MutatingWebhookConfiguration"));
    assert.ok(kinds.indexOf("PriorityLevelConfiguration") < kinds.indexOf("FlowSchema"));
  }
});

FlowControl.run();
