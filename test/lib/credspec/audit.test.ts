import { suite } from "uvu";
import * as assert from "uvu/assert";
import { auditCluster } from "../../../lib/credspec/audit.js";
import { seededCluster, seededFindings } from "../../support/auditSeed.js";

const Audit = suite("auditCluster: what will fail on a node, before a pod finds out");

Audit("a clean cluster gives no finding", () => {
  assert.equal(auditCluster(seededCluster(true)), []);
});

Audit("one example of each finding gives exactly those findings", () => {
  const findings = auditCluster(seededCluster(false));
  assert.equal(findings.map((f) => `${f.severity} ${f.kind} ${f.object}`).sort(), seededFindings);
  assert.match(findings.find((f) => f.kind === "grantToMissingCredSpec")!.problem, /"webap1", which does not exist/);
  assert.match(findings.find((f) => f.kind === "invalidCredSpec")!.problem, /credspec\.CmsPlugins: must be/);
});

Audit("with GMSA_RANDOM_HOSTNAME the shared-hostname finding is not made", () => {
  assert.not.ok(auditCluster({ ...seededCluster(false), randomHostname: true }).some((f) => f.kind === "sharedHostname"));
});

Audit.run();
