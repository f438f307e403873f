import { suite } from "uvu";
import * as assert from "uvu/assert";
import { explainPod } from "../../../lib/credspec/explainPod.js";
import { fakePorts } from "../../support/fakePorts.js";
import { gmsa, pod } from "../../support/reviews.js";

const Explain = suite("explainPod");

function gmsaPod(name: string) {
  const p = pod({ serviceAccountName: "web", namespace: "apps" });
  p.spec.containers[0]!.securityContext = gmsa(name);
  return p;
}

Explain("a pod whose account may use an existing spec: where the contents go, and admitted", async () => {
  const ports = fakePorts();
  const { lines, admitted } = await explainPod(gmsaPod("webapp1-credspec"), ports);
  assert.ok(admitted);
  assert.match(lines.join("\n"), /mutate: allowed, would add the contents at \/spec\/containers\/0\/securityContext\/windowsOptions\/gmsaCredentialSpec/);
  assert.match(lines.join("\n"), /validate: allowed/);
  assert.not.match(lines.join("\n"), /WebApplication1|S-1-5-21/);
});

Explain("a pod whose account may not use the spec: the 403 the webhook would give, advice included, and refused", async () => {
  const ports = fakePorts({ decide: () => ({ allowed: false }) });
  const { lines, admitted } = await explainPod(gmsaPod("webapp1-credspec"), ports);
  assert.not.ok(admitted);
  assert.match(lines.join("\n"), /mutate: allowed, nothing to add/);
  assert.match(
    lines.join("\n"),
    /validate: denied \(403\): .*is not authorized to use GMSACredentialSpec "webapp1-credspec"; if the name is right, to grant it: npm run credspec -- grant/,
  );
  assert.ok(ports.reviews.every((r) => r.namespace === "apps"));
});

Explain("a missing spec is refused with 422; --namespace is where the pod is judged", async () => {
  const ports = fakePorts();
  const { lines, admitted } = await explainPod(gmsaPod("not-there"), ports, { namespace: "elsewhere" });
  assert.not.ok(admitted);
  assert.match(lines.join("\n"), /validate: denied \(422\): .*does not exist/);
  assert.ok(ports.reviews.every((r) => r.namespace === "elsewhere"));
});

Explain("a pod without GMSA settings asks nothing", async () => {
  const ports = fakePorts();
  const result = await explainPod(pod(), ports);
  assert.ok(result.admitted);
  assert.equal(ports.reviews.length + ports.lookups.length, 0);
});

Explain("a document that is not a pod is said so", async () => {
  const result = await explainPod({ spec: "x" }, fakePorts());
  assert.not.ok(result.admitted);
  assert.match(result.lines[0]!, /^not a Pod/);
});

Explain.run();

const Workloads = suite("explainPod: workloads");

Workloads("a workload's pods run in its namespace, never the one its template claims", async () => {
  const ports = fakePorts({ decide: (principal, name) => ({ allowed: principal.serviceAccount?.namespace === "elsewhere" && name === "webapp1-credspec" }) });
  const template = { metadata: { namespace: "elsewhere", labels: { app: "web" } }, spec: gmsaPod("webapp1-credspec").spec };
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { selector: { matchLabels: { app: "web" } }, template } };
  const { lines, admitted } = await explainPod(deployment, ports);
  assert.match(lines[0] ?? "", /^Deployment "web": its pods run in namespace "default" as service account "web"$/);
  assert.not.ok(admitted, "the account in the template's namespace may use the spec; the one in the workload's may not");
});

Workloads.run();
