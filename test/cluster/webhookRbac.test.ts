import { suite } from "uvu";
import * as assert from "uvu/assert";
import { webhookClusterRole } from "../../cluster/webhookRbac.js";

/** The webhook's own ClusterRole grants what the configured checks use, and nothing more. */
const Role = suite("webhook ClusterRole");

function reviewResources(role: ReturnType<typeof webhookClusterRole>): string[] {
  return role.rules.filter((rule) => rule.apiGroups.includes("authorization.k8s.io")).flatMap((rule) => rule.resources);
}

Role("without the requesting-user check, only LocalSubjectAccessReviews (service accounts, in their namespace)", () => {
  assert.equal(reviewResources(webhookClusterRole()), ["localsubjectaccessreviews"]);
  assert.equal(reviewResources(webhookClusterRole({ authorizeRequestingUser: false })), ["localsubjectaccessreviews"]);
});

Role("with the requesting-user check, SubjectAccessReviews too", () => {
  assert.equal(reviewResources(webhookClusterRole({ authorizeRequestingUser: true })).sort(), ["localsubjectaccessreviews", "subjectaccessreviews"]);
});

Role("every rule only creates reviews, reads credential specs, or gets the product's own mutating webhook configuration", () => {
  for (const options of [{}, { authorizeRequestingUser: true }]) {
    for (const rule of webhookClusterRole(options).rules) {
      if (rule.apiGroups.includes("authorization.k8s.io")) assert.equal(rule.verbs, ["create"]);
      else if (rule.apiGroups.includes("admissionregistration.k8s.io"))
        assert.equal(
          { resources: rule.resources, resourceNames: "resourceNames" in rule ? rule.resourceNames : undefined, verbs: rule.verbs },
          { resources: ["mutatingwebhookconfigurations"], resourceNames: ["gmsa-admission"], verbs: ["get"] },
        );
      else
        assert.equal(
          { groups: rule.apiGroups, resources: rule.resources, verbs: rule.verbs },
          { groups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["get", "list", "watch"] },
        );
    }
  }
});

Role.run();
