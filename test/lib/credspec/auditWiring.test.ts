import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterManifests, type KubernetesObject } from "../../../cluster/manifests.js";
import { auditCluster } from "../../../lib/credspec/audit.js";
import { relayNamespaceOf, wiringFindings, type StoredWiring } from "../../../lib/credspec/auditWiring.js";
import { relayName } from "../../../lib/wiring/relayIngress.js";
import { relayNetworkPolicy } from "../../../cluster/relayNetworkPolicy.js";
import { safetyNetPolicyNames } from "../../../lib/wiring/safetyNetNames.js";
import { seededCluster } from "../../support/auditSeed.js";

/** The product's wiring as a cluster stores it after `npm run wire -- --apply`, with what the API server adds. */
function storedAsWired(options: { safetyNet?: boolean } = {}): StoredWiring {
  const objects = clusterManifests({
    target: { kind: "url", baseUrl: "https://func.example" },
    subject: { kind: "User", name: "webhook" },
    safetyNet: options.safetyNet !== false,
  });
  const one = (kind: string, name?: string) => {
    const found = objects.find((object) => object.kind === kind && (name === undefined || object.metadata.name === name));
    // Defaults the API server stores beside what was sent.
    return found ? storedWithDefaults(found) : undefined;
  };
  return {
    mutating: one("MutatingWebhookConfiguration"),
    validating: one("ValidatingWebhookConfiguration"),
    crd: one("CustomResourceDefinition"),
    policies: Object.fromEntries(safetyNetPolicyNames.map((name) => [name, one("ValidatingAdmissionPolicy", name)])),
    bindings: Object.fromEntries(safetyNetPolicyNames.map((name) => [name, one("ValidatingAdmissionPolicyBinding", name)])),
  };
}

function storedWithDefaults(object: KubernetesObject): Record<string, unknown> {
  const copy = structuredClone(object) as Record<string, unknown> & { webhooks?: Array<Record<string, unknown>> };
  copy.metadata = { ...(copy.metadata as object), uid: "u", resourceVersion: "1" };
  for (const webhook of copy.webhooks ?? []) {
    webhook.objectSelector ??= {};
    webhook.namespaceSelector ??= {};
  }
  return copy;
}

type Mutable = { webhooks: Array<Record<string, unknown>>; spec: Record<string, unknown> };

const Wiring = suite("the audit's wiring findings");

Wiring("wiring as rendered, with the API server's defaults: nothing", () => {
  assert.equal(wiringFindings(storedAsWired()), []);
});

Wiring("without the safety net: one warning, not an error", () => {
  const findings = wiringFindings(storedAsWired({ safetyNet: false }));
  assert.equal(
    findings.map((f) => f.kind),
    ["safetyNetMissing"],
  );
  const audited = auditCluster({ ...seededCluster(true), wiring: storedAsWired({ safetyNet: false }) });
  assert.equal(
    audited.map((f) => `${f.severity} ${f.kind}`),
    ["warning safetyNetMissing"],
  );
});

Wiring("a webhook configuration deleted, or its webhook removed: the API server sends it nothing", () => {
  const stored = storedAsWired();
  const findings = wiringFindings({ ...stored, mutating: undefined });
  assert.equal(
    findings.map((f) => `${f.kind} ${f.object}`),
    ["wiringMissing MutatingWebhookConfiguration gmsa-admission"],
  );
  const validating = stored.validating as Mutable;
  validating.webhooks = validating.webhooks.filter((w) => w.name !== "credspec.gmsa-admission.windows.k8s.io");
  assert.match(wiringFindings(stored)[0]!.problem, /holds no webhook credspec\.gmsa-admission\.windows\.k8s\.io/);
});

Wiring("the fields that decide what is checked, changed by hand: each named", () => {
  const cases: Array<[string, (w: Record<string, unknown>) => void, RegExp]> = [
    ["failurePolicy Ignore during an outage", (w) => (w.failurePolicy = "Ignore"), /failurePolicy: rendered "Fail", stored "Ignore"/],
    ["a namespace label that skips the checks", (w) => (w.namespaceSelector = { matchLabels: { team: "x" } }), /namespaceSelector/],
    ["an objectSelector", (w) => (w.objectSelector = { matchLabels: { gmsa: "checked" } }), /objectSelector: rendered none/],
    ["a rule dropped", (w) => (w.rules = (w.rules as unknown[]).slice(0, 1)), /rules: rendered 3 items, stored 1/],
    ["the match conditions emptied", (w) => (w.matchConditions = []), /matchConditions: rendered \d+ items, stored 0/],
    [
      "a selector expression taken out",
      (w) => (w.namespaceSelector = { matchExpressions: [(w.namespaceSelector as { matchExpressions: unknown[] }).matchExpressions[0]] }),
      /namespaceSelector/,
    ],
  ];
  for (const [what, change, expected] of cases) {
    const stored = storedAsWired();
    change((stored.validating as Mutable).webhooks[0]!);
    const findings = wiringFindings(stored);
    assert.equal(
      findings.map((f) => `${f.kind} ${f.object}`),
      ["wiringChanged ValidatingWebhookConfiguration gmsa-admission (validate.gmsa-admission.windows.k8s.io)"],
      what,
    );
    assert.match(findings[0]!.problem, expected, what);
  }
  // Where it is reached and its timeout depend on the wiring: not judged.
  const moved = storedAsWired();
  const webhook = (moved.mutating as Mutable).webhooks[0]!;
  // As relay wiring reaches it: the relay's service and its CA.
  webhook.clientConfig = { service: { namespace: "gmsa-admission", name: "gmsa-admission-relay", path: "/mutate", port: 443 }, caBundle: "Q0E=" };
  webhook.timeoutSeconds = 10;
  assert.equal(wiringFindings(moved), []);
});

Wiring("the safety net: a binding switched to Warn, scoped down, or gone; a policy that fails open", () => {
  const [pods, bindings] = safetyNetPolicyNames;
  const warn = storedAsWired();
  (warn.bindings[pods!] as Mutable).spec.validationActions = ["Warn"];
  assert.match(wiringFindings(warn)[0]!.problem, /validationActions/);
  const scoped = storedAsWired();
  (scoped.bindings[pods!] as Mutable).spec.matchResources = { namespaceSelector: { matchLabels: { checked: "yes" } } };
  assert.match(wiringFindings(scoped)[0]!.problem, /matchResources\.namespaceSelector/);
  const gone = storedAsWired();
  const withoutBinding = { ...gone, bindings: { ...gone.bindings, [bindings!]: undefined } };
  assert.equal(
    wiringFindings(withoutBinding).map((f) => `${f.kind} ${f.object}`),
    [`wiringMissing ValidatingAdmissionPolicyBinding ${bindings}`],
  );
  const open = storedAsWired();
  (open.policies[pods!] as Mutable).spec.failurePolicy = "Ignore";
  assert.equal(
    wiringFindings(open).map((f) => `${f.kind} ${f.object}`),
    [`wiringChanged ValidatingAdmissionPolicy ${pods}`],
  );
});

Wiring("the CRD deleted or its schema changed", () => {
  const stored = storedAsWired();
  assert.equal(
    wiringFindings({ ...stored, crd: undefined }).map((f) => f.kind),
    ["wiringMissing"],
  );
  const crd = stored.crd as Mutable;
  crd.spec.scope = "Namespaced";
  assert.match(wiringFindings(stored)[0]!.problem, /spec\.scope: rendered "Cluster", stored "Namespaced"/);
});

Wiring("relay wiring: the relay's NetworkPolicy as rendered passes; opened to every source, or gone, is an error", () => {
  const stored = storedAsWired();
  for (const configuration of [stored.mutating, stored.validating] as Mutable[]) {
    for (const webhook of configuration.webhooks) {
      const path = `/${String(webhook.name).split(".")[0]!.replace("credspec", "validate-credspec")}`;
      webhook.clientConfig = { service: { namespace: "gmsa-relay", name: relayName, path, port: 443 }, caBundle: "Q0E=" };
    }
  }
  assert.is(relayNamespaceOf([stored.mutating, stored.validating]), "gmsa-relay");
  assert.is(relayNamespaceOf([storedAsWired().mutating]), undefined, "url wiring calls no relay");
  const rendered = relayNetworkPolicy({
    name: relayName,
    namespace: "gmsa-relay",
    labels: {},
    podSelector: { "app.kubernetes.io/name": relayName },
    port: "https",
    allowFrom: [{ kind: "konnectivity" }],
  });
  assert.equal(wiringFindings({ ...stored, relay: { namespace: "gmsa-relay", networkPolicies: [rendered] } }), []);
  const opened = structuredClone(rendered);
  (opened.spec.ingress[0] as { from?: unknown }).from = undefined;
  const findings = wiringFindings({ ...stored, relay: { namespace: "gmsa-relay", networkPolicies: [opened] } });
  assert.equal(
    findings.map((f) => `${f.kind} ${f.object}`),
    [`wiringChanged NetworkPolicy gmsa-relay/${relayName}`],
  );
  assert.match(findings[0]!.problem, /without sources, which admits every source/);
  assert.match(wiringFindings({ ...stored, relay: { namespace: "gmsa-relay", networkPolicies: [] } })[0]!.problem, /no NetworkPolicy selects its pods/);
});

Wiring("from the attack review: a match condition on the credential spec webhook, and each part of a policy's match or rules changed", () => {
  const conditioned = storedAsWired();
  (conditioned.validating as Mutable).webhooks[1]!.matchConditions = [{ name: "skip", expression: "false" }];
  assert.match(wiringFindings(conditioned)[0]?.problem ?? "", /matchConditions: rendered none/);
  const [pods] = safetyNetPolicyNames;
  const edits: Array<[string, (spec: Record<string, unknown>) => void, RegExp]> = [
    [
      "a namespace label",
      (spec) => ((spec.matchConstraints as Record<string, unknown>).namespaceSelector = { matchLabels: { gmsa: "checked" } }),
      /matchConstraints\.namespaceSelector/,
    ],
    [
      "an object selector",
      (spec) => ((spec.matchConstraints as Record<string, unknown>).objectSelector = { matchLabels: { gmsa: "checked" } }),
      /matchConstraints\.objectSelector/,
    ],
    [
      "pods excluded",
      (spec) => ((spec.matchConstraints as Record<string, unknown>).excludeResourceRules = [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }]),
      /excludeResourceRules/,
    ],
    ["a rule cut", (spec) => (spec.matchConstraints as { resourceRules: unknown[] }).resourceRules.splice(1), /resourceRules/],
    ["a condition that is never true", (spec) => (spec.matchConditions as unknown[]).push({ name: "never", expression: "false" }), /matchConditions/],
    ["every validation replaced by true", (spec) => (spec.validations = [{ expression: "true" }]), /validations/],
  ];
  for (const [what, edit, expected] of edits) {
    const stored = storedAsWired();
    edit((stored.policies[pods!] as Mutable).spec);
    const findings = wiringFindings(stored);
    assert.equal(
      findings.map((f) => `${f.kind} ${f.object}`),
      [`wiringChanged ValidatingAdmissionPolicy ${pods}`],
      what,
    );
    assert.match(findings[0]!.problem, expected, what);
  }
});

Wiring("the policies as rendered with the requesting-user check pass too; a binding that denies and audits still denies", () => {
  const objects = clusterManifests({ target: { kind: "url", baseUrl: "https://func.example" }, subject: { kind: "User", name: "webhook" }, authorizeRequestingUser: true });
  const stored = storedAsWired();
  for (const name of safetyNetPolicyNames) {
    (stored.policies as Record<string, unknown>)[name] = objects.find((o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === name);
  }
  assert.equal(wiringFindings(stored), []);
  (stored.bindings[safetyNetPolicyNames[0]] as Mutable).spec.validationActions = ["Deny", "Audit"];
  assert.equal(wiringFindings(stored), []);
});

Wiring("the CRD: a conversion webhook is an error; one installed by someone else is judged on what admission relies on", () => {
  const converted = storedAsWired();
  (converted.crd as Mutable).spec.conversion = { strategy: "Webhook", webhook: { clientConfig: { url: "https://x.example/convert" } } };
  assert.match(wiringFindings(converted)[0]?.problem ?? "", /spec\.conversion/);
  // The product's own (applied as its field manager) is held to all it rendered.
  const ours = storedAsWired();
  const crd = ours.crd as Mutable & { metadata: Record<string, unknown> };
  crd.metadata.managedFields = [{ manager: "gmsa-admission", operation: "Apply" }];
  (crd.spec.versions as Array<{ schema?: unknown }>)[0]!.schema = { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } };
  assert.match(wiringFindings(ours)[0]?.problem ?? "", /spec\.versions\[0\]\.schema/);
  // Another installer's, with its own schema and order of versions: nothing, while both are served.
  const theirs = storedAsWired();
  const other = theirs.crd as Mutable;
  other.spec.versions = [
    { name: "v1alpha1", served: true, storage: false, schema: { openAPIV3Schema: { type: "object" } } },
    { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object" } } },
  ];
  assert.equal(wiringFindings(theirs), []);
  (other.spec.versions as Array<{ served: boolean }>)[1]!.served = false;
  assert.match(wiringFindings(theirs)[0]?.problem ?? "", /v1 is not served/);
});

Wiring("what the audit may not read is one warning that names it, and nothing of the wiring is judged", () => {
  const findings = auditCluster({ ...seededCluster(true), wiring: { ...storedAsWired(), mutating: undefined, unreadable: ["MutatingWebhookConfiguration gmsa-admission"] } });
  assert.equal(
    findings.map((f) => `${f.severity} ${f.kind} ${f.object}`),
    ["warning wiringUnreadable MutatingWebhookConfiguration gmsa-admission"],
  );
});

Wiring("a webhook pointed elsewhere: another path or service is an error; another host, a warning where the app knows its own", () => {
  const validate = (stored: StoredWiring) => (stored.validating as Mutable).webhooks[0]!;
  const allowAll = storedAsWired();
  validate(allowAll).clientConfig = { url: "https://allow-all.example/allow" };
  assert.equal(
    wiringFindings(allowAll).map((f) => `${f.kind} ${f.object}`),
    ["wiringChanged ValidatingWebhookConfiguration gmsa-admission (validate.gmsa-admission.windows.k8s.io)"],
  );
  assert.match(wiringFindings(allowAll)[0]!.problem, /clientConfig\.url: rendered a URL ending in \/validate/);
  const otherService = storedAsWired();
  validate(otherService).clientConfig = { service: { namespace: "gmsa-admission", name: "allow-all", path: "/validate", port: 443 } };
  assert.match(wiringFindings(otherService)[0]!.problem, /calls "allow-all", not the relay/);
  // Same path on another host: only the app can tell, by its own host name.
  const otherHost = storedAsWired();
  validate(otherHost).clientConfig = { url: "https://allow-all.example/validate" };
  assert.equal(wiringFindings(otherHost), [], "without the app's host: not judged");
  const here = { ...otherHost, functionHost: "func.example" };
  assert.equal(
    auditCluster({ ...seededCluster(true), wiring: here }).map((f) => `${f.severity} ${f.kind} ${f.object}`),
    ["warning wiringElsewhere ValidatingWebhookConfiguration gmsa-admission (validate.gmsa-admission.windows.k8s.io)"],
  );
  assert.equal(wiringFindings({ ...storedAsWired(), functionHost: "FUNC.example" }), [], "the app's own host, in any case");
});

Wiring.run();
