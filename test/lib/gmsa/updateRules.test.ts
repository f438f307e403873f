import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../../lib/gmsa/canonicalJson.js";
import { expandCredSpecs } from "../../../lib/gmsa/expandCredSpecs.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { admission, fakePorts } from "../../support/fakePorts.js";
import { credSpecFixture } from "../../support/fixtures.js";
import { gmsa, pod, type PodSpec } from "../../support/reviews.js";

const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const payroll = canonicalJson(credSpecFixture("payroll-gmsa").credspec);

function running(): PodSpec {
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec", webapp);
  p.spec.containers.push({ name: "sidecar", securityContext: gmsa("payroll-gmsa", payroll) });
  p.spec.initContainers = [{ name: "setup", securityContext: gmsa("payroll-gmsa", payroll) }];
  p.metadata.annotations = { "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" };
  return p;
}

function changed(edit: (p: PodSpec) => void): PodSpec {
  const p = running();
  edit(p);
  return p;
}

const Update = suite("validatePod on UPDATE");

const changes: Array<[string, (p: PodSpec) => void, RegExp]> = [
  ["the pod's name changes", (p) => (p.spec.securityContext = gmsa("payroll-gmsa", webapp)), /pod "web-0": .*name would change from "webapp1-credspec" to "payroll-gmsa"/],
  ["the pod's contents change", (p) => (p.spec.securityContext = gmsa("webapp1-credspec", "{}")), /pod "web-0": .*contents for GMSACredentialSpec "webapp1-credspec" would change/],
  ["the pod's contents disappear", (p) => (p.spec.securityContext = gmsa("webapp1-credspec")), /contents for GMSACredentialSpec "webapp1-credspec" would disappear/],
  ["a container's settings disappear", (p) => delete p.spec.containers[1]!.securityContext, /container "sidecar" of pod "web-0": .*name would change from "payroll-gmsa" to none/],
  ["a container gains a name", (p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec")), /container "iis" of pod "web-0": .*from none to "webapp1-credspec"/],
  ["an init container's name changes", (p) => (p.spec.initContainers![0]!.securityContext = gmsa("webapp1-credspec", payroll)), /init container "setup"/],
  [
    "an annotation changes",
    (p) => (p.metadata.annotations!["iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name"] = "payroll-gmsa"),
    /alpha annotation's credential spec name would change/,
  ],
  ["an annotation disappears", (p) => (p.metadata.annotations = {}), /alpha annotation's credential spec name would change from "webapp1-credspec" to none/],
  [
    "an annotation appears",
    (p) => (p.metadata.annotations!["pod.alpha.windows.kubernetes.io/gmsa-credential-spec"] = webapp),
    /pod "web-0": .*alpha annotation's credential spec contents would appear/,
  ],
];

for (const [what, edit, message] of changes) {
  Update(`refuses with 403 when ${what}`, async () => {
    const ports = fakePorts();
    const verdict = await validatePod(admission("UPDATE", changed(edit), { oldPod: running() as never }), ports);
    assert.is(verdict.kind, "denied");
    if (verdict.kind !== "denied") return;
    assert.is(verdict.code, 403);
    assert.match(verdict.message, message);
    assert.match(verdict.message, /GMSA settings cannot be changed on an existing pod/);
  });
}

Update("allows other changes, such as labels and images, without any API call", async () => {
  const ports = fakePorts();
  const verdict = await validatePod(
    admission(
      "UPDATE",
      changed((p) => {
        p.metadata.annotations!["team"] = "web";
        p.spec.containers[0]!.image = "iis:2";
      }),
      { oldPod: running() as never },
    ),
    ports,
  );
  assert.is(verdict.kind, "allowed");
  assert.equal(ports.reviews.length + ports.lookups.length, 0);
});

Update("gives ephemeral containers added by the update the CREATE checks", async () => {
  const ports = fakePorts({ decide: (_, name) => ({ allowed: name !== "payroll-gmsa" }) });
  const added = changed((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("payroll-gmsa", payroll) }]));
  const verdict = await validatePod(admission("UPDATE", added, { oldPod: running() as never, subResource: "ephemeralcontainers" }), ports);
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /ephemeral container "debug" of pod "web-0": service account "default"/);
});

Update("allows an added ephemeral container whose credential spec checks out", async () => {
  const ports = fakePorts();
  const added = changed((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("webapp1-credspec", webapp) }]));
  const verdict = await validatePod(admission("UPDATE", added, { oldPod: running() as never, subResource: "ephemeralcontainers" }), ports);
  assert.is(verdict.kind, "allowed");
  assert.equal(
    ports.reviews.map((r) => r.name),
    ["webapp1-credspec"],
  );
});

Update("refuses an added ephemeral container whose contents do not match", async () => {
  const added = changed((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("webapp1-credspec", payroll) }]));
  const verdict = await validatePod(admission("UPDATE", added, { oldPod: running() as never, subResource: "ephemeralcontainers" }), fakePorts());
  assert.is(verdict.kind === "denied" && verdict.code, 422);
});

Update("an existing ephemeral container cannot change its settings", async () => {
  const before = changed((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("webapp1-credspec", webapp) }]));
  const after = changed((p) => (p.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("payroll-gmsa", payroll) }]));
  const verdict = await validatePod(admission("UPDATE", after, { oldPod: before as never }), fakePorts());
  assert.is(verdict.kind === "denied" && verdict.code, 403);
});

Update("refuses a container name given twice, which could hide a change behind an unchanged copy", async () => {
  const after = changed((p) => p.spec.containers.splice(1, 0, { name: "sidecar", securityContext: gmsa("webapp1-credspec", webapp) }));
  const verdict = await validatePod(admission("UPDATE", after, { oldPod: running() as never }), fakePorts());
  assert.is(verdict.kind === "denied" && verdict.code, 422);
  assert.match(verdict.kind === "denied" ? verdict.message : "", /container "sidecar" of pod "web-0": appears more than once/);
});

Update("refuses an UPDATE without the old object", async () => {
  const verdict = await validatePod(admission("UPDATE", running()), fakePorts());
  assert.is(verdict.kind === "denied" && verdict.code, 400);
});

const addEphemeral = (base: PodSpec, ...containers: PodSpec["spec"]["containers"]) => {
  const after = structuredClone(base);
  after.spec.ephemeralContainers = [...(after.spec.ephemeralContainers ?? []), ...containers];
  return after;
};
const asEphemeralUpdate = (after: PodSpec, before: PodSpec) => admission("UPDATE", after, { oldPod: before as never, subResource: "ephemeralcontainers" });
const aliceWithout = (...names: string[]) =>
  fakePorts({ settings: { authorizeRequestingUser: true }, decide: (p, name) => ({ allowed: p.user !== "alice" || !names.includes(name) }) });

Update("an added ephemeral container that names no spec runs under the pod's: the requesting user needs use of it", async () => {
  const ports = aliceWithout("webapp1-credspec");
  const verdict = await validatePod(asEphemeralUpdate(addEphemeral(running(), { name: "debug" }), running()), ports);
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.match(
    verdict.kind === "denied" ? verdict.message : "",
    /^ephemeral container "debug" of pod "web-0" \(inheriting the pod's credential spec\): user "alice" is not authorized to use GMSACredentialSpec "webapp1-credspec"/,
  );
  assert.equal(ports.lookups, []);
});

Update("an added ephemeral container under the pod's spec is allowed when every principal holds use of it", async () => {
  const ports = fakePorts({ settings: { authorizeRequestingUser: true } });
  const verdict = await validatePod(asEphemeralUpdate(addEphemeral(running(), { name: "debug" }), running()), ports);
  assert.is(verdict.kind, "allowed");
  assert.equal(
    ports.reviews.map((r) => [r.principal.user, r.name]),
    [
      ["system:serviceaccount:apps:default", "webapp1-credspec"],
      ["alice", "webapp1-credspec"],
    ],
  );
});

Update("the pod's alpha annotation is inherited the same way", async () => {
  const base = pod();
  base.metadata.annotations = { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" };
  const verdict = await validatePod(asEphemeralUpdate(addEphemeral(base, { name: "debug" }), base), aliceWithout("payroll-gmsa"));
  assert.match(verdict.kind === "denied" ? verdict.message : "", /ephemeral container "debug" .*user "alice" is not authorized to use GMSACredentialSpec "payroll-gmsa"/);
});

Update("an added ephemeral container that names its own spec needs use of that one, not the pod's", async () => {
  const ports = aliceWithout("webapp1-credspec");
  const verdict = await validatePod(asEphemeralUpdate(addEphemeral(running(), { name: "debug", securityContext: gmsa("payroll-gmsa", payroll) }), running()), ports);
  assert.is(verdict.kind, "allowed");
  assert.not.ok(ports.reviews.some((r) => r.name === "webapp1-credspec"));
});

Update("a container annotation naming the new ephemeral container is not its own spec: it runs under the pod's, whose use is asked", async () => {
  const base = running();
  base.metadata.annotations = { "debug.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" };
  const verdict = await validatePod(asEphemeralUpdate(addEphemeral(base, { name: "debug" }), base), aliceWithout("webapp1-credspec"));
  assert.is(verdict.kind === "denied" && verdict.code, 403);
  assert.match(
    verdict.kind === "denied" ? verdict.message : "",
    /ephemeral container "debug" .*inheriting.*user "alice" is not authorized to use GMSACredentialSpec "webapp1-credspec"/,
  );
});

Update("a pod stored with pod-level contents but no name: a new ephemeral container naming none of its own is refused, one naming its own is checked", async () => {
  const legacy = pod();
  legacy.spec.securityContext = { windowsOptions: { gmsaCredentialSpec: webapp } };
  const refused = await validatePod(asEphemeralUpdate(addEphemeral(legacy, { name: "debug" }), legacy), fakePorts());
  assert.is(refused.kind === "denied" && refused.code, 422);
  assert.match(refused.kind === "denied" ? refused.message : "", /ephemeral container "debug" .*name no credential spec, so nobody's use of it can be checked/);
  const named = await validatePod(asEphemeralUpdate(addEphemeral(legacy, { name: "debug", securityContext: gmsa("payroll-gmsa", payroll) }), legacy), fakePorts());
  assert.is(named.kind, "allowed");
});

Update("ephemeral containers already in the pod, or a pod with no pod-level spec, ask nothing", async () => {
  const withDebug = addEphemeral(running(), { name: "debug" });
  const ports = aliceWithout("webapp1-credspec");
  assert.is((await validatePod(asEphemeralUpdate(withDebug, withDebug), ports)).kind, "allowed");
  const plain = pod();
  assert.is((await validatePod(asEphemeralUpdate(addEphemeral(plain, { name: "debug" }), plain), ports)).kind, "allowed");
  assert.equal(ports.reviews, []);
});

Update("mutation inlines nothing for an ephemeral container that inherits the pod's spec", async () => {
  const ports = fakePorts();
  const verdict = await expandCredSpecs(asEphemeralUpdate(addEphemeral(running(), { name: "debug" }), running()), ports);
  assert.equal(verdict.kind === "allowed" && verdict.patch, []);
});

Update.run();
