import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../../lib/gmsa/canonicalJson.js";
import { expandCredSpecs, maxInlinedBytes } from "../../../lib/gmsa/expandCredSpecs.js";
import type { Admission, PolicyDependencies } from "../../../lib/gmsa/podAdmission.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import type { Verdict } from "../../../lib/webhook/verdict.js";
import { admission, fakePorts } from "../../support/fakePorts.js";
import { credSpecFixture } from "../../support/fixtures.js";
import { gmsa, pod, type PodSpec } from "../../support/reviews.js";

/**
 * The checks made before any API call, through both webhooks: a pod cannot make the webhook
 * look up names for containers it does not have, nor more names than any workload needs.
 */
const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const policies: Array<[string, (a: Admission, d: PolicyDependencies) => Promise<Verdict>]> = [
  ["mutate", expandCredSpecs],
  ["validate", validatePod],
];

function podWith(edit: (p: PodSpec) => void): PodSpec {
  const p = pod();
  edit(p);
  return p;
}

const nameKey = (container: string) => `${container}.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name`;
const contentsKey = (container: string) => `${container}.container.alpha.windows.kubernetes.io/gmsa-credential-spec`;

const Checks = suite("checks before any API call");

for (const [webhook, policy] of policies) {
  Checks(`${webhook}: refuses with 422 a container annotation for a container the pod does not have, naming the annotation`, async () => {
    const ports = fakePorts();
    const verdict = await policy(
      admission(
        "CREATE",
        podWith((p) => (p.metadata.annotations = { [nameKey("ghost")]: "webapp1-credspec" })),
      ),
      ports,
    );
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(verdict.kind === "denied" ? verdict.message : "", `pod "web-0": annotation ${nameKey("ghost")} names container "ghost", which the pod does not have`);
    assert.equal(ports.lookups, []);
    assert.equal(ports.reviews, []);
  });

  Checks(`${webhook}: refuses contents annotated for a missing container too`, async () => {
    const ports = fakePorts();
    const verdict = await policy(
      admission(
        "CREATE",
        podWith((p) => (p.metadata.annotations = { [contentsKey("ghost")]: webapp })),
      ),
      ports,
    );
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(verdict.kind === "denied" ? verdict.message : "", `annotation ${contentsKey("ghost")} names container "ghost"`);
  });

  for (const [kind, edit] of [
    ["container", (p: PodSpec) => p.spec.containers.push({ name: "app" })],
    ["init container", (p: PodSpec) => (p.spec.initContainers = [{ name: "app" }])],
    ["ephemeral container", (p: PodSpec) => (p.spec.ephemeralContainers = [{ name: "app" }])],
  ] as const) {
    Checks(`${webhook}: accepts a container annotation for an existing ${kind}`, async () => {
      const verdict = await policy(
        admission(
          "CREATE",
          podWith((p) => {
            edit(p);
            p.metadata.annotations = { [nameKey("app")]: "webapp1-credspec", [contentsKey("app")]: webapp };
          }),
        ),
        fakePorts(),
      );
      assert.is(verdict.kind, "allowed");
    });
  }

  Checks(`${webhook}: refuses more distinct names than GMSA_MAX_CREDSPECS_PER_POD with 422 before any API call`, async () => {
    const ports = fakePorts({ settings: { maxCredSpecsPerPod: 3 } });
    const p = podWith((p) => {
      p.spec.containers = ["a", "b", "c", "d"].map((name) => ({ name, securityContext: gmsa(`spec-${name}`) }));
    });
    const verdict = await policy(admission("CREATE", p), ports);
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(verdict.kind === "denied" ? verdict.message : "", 'pod "web-0": names 4 distinct GMSA credential specs; at most 3 are allowed in one pod');
    assert.equal(ports.lookups, []);
    assert.equal(ports.reviews, []);
  });

  Checks(`${webhook}: refuses more places than GMSA_MAX_PLACES_PER_POD with 422 before any API call, even for one usable name`, async () => {
    const ports = fakePorts({ settings: { maxPlacesPerPod: 4 } });
    const p = podWith((p) => {
      p.spec.securityContext = gmsa("webapp1-credspec");
      p.spec.containers = ["a", "b", "c", "d"].map((name) => ({ name, securityContext: gmsa("webapp1-credspec") }));
    });
    const verdict = await policy(admission("CREATE", p), ports);
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(
      verdict.kind === "denied" ? verdict.message : "",
      'pod "web-0": sets GMSA credential specs in 5 places (pod, containers, init and ephemeral containers, annotations); at most 4 are allowed in one pod',
    );
    assert.equal(ports.lookups, []);
    assert.equal(ports.reviews, []);
  });

  Checks(`${webhook}: a pod at the cap of places is admitted`, async () => {
    const ports = fakePorts({ settings: { maxPlacesPerPod: 5 } });
    const p = podWith((p) => {
      p.spec.securityContext = gmsa("webapp1-credspec");
      p.spec.containers = ["a", "b", "c", "d"].map((name) => ({ name, securityContext: gmsa("webapp1-credspec", webhook === "validate" ? webapp : undefined) }));
      if (webhook === "validate") p.spec.securityContext = gmsa("webapp1-credspec", webapp);
    });
    assert.is((await policy(admission("CREATE", p), ports)).kind, "allowed");
  });

  Checks(`${webhook}: counts names, not places: one name in many places is one`, async () => {
    const ports = fakePorts({ settings: { maxCredSpecsPerPod: 1 } });
    const p = podWith((p) => {
      p.spec.securityContext = gmsa("webapp1-credspec");
      p.spec.containers = ["a", "b", "c", "d"].map((name) => ({ name, securityContext: gmsa("webapp1-credspec") }));
      p.metadata.annotations = { [nameKey("a")]: "webapp1-credspec" };
    });
    assert.is((await policy(admission("CREATE", p), ports)).kind, "allowed");
  });

  Checks(`${webhook}: holds ephemeral containers added by an UPDATE to the same cap`, async () => {
    const ports = fakePorts({ settings: { maxCredSpecsPerPod: 2 } });
    const before = pod();
    const after = podWith((p) => (p.spec.ephemeralContainers = ["x", "y", "z"].map((name) => ({ name, securityContext: gmsa(`spec-${name}`) }))));
    const verdict = await policy(admission("UPDATE", after, { oldPod: before as never, subResource: "ephemeralcontainers" }), ports);
    assert.is(verdict.kind === "denied" && verdict.code, 422);
    assert.match(verdict.kind === "denied" ? verdict.message : "", /names 3 distinct GMSA credential specs; at most 2/);
    assert.equal(ports.lookups, []);
    assert.equal(ports.reviews, []);
  });
}

Checks("the cap defaults to 16 and a pod with 3 000 annotated names costs nothing", async () => {
  const ports = fakePorts();
  assert.is(ports.settings.maxCredSpecsPerPod, 16);
  const p = podWith((p) => {
    p.spec.containers = Array.from({ length: 3000 }, (_, i) => ({ name: `c${i}` }));
    p.metadata.annotations = Object.fromEntries(p.spec.containers.map((c, i) => [nameKey(c.name), `n${i}`]));
  });
  for (const [, policy] of policies) {
    const verdict = await policy(admission("CREATE", p), ports);
    assert.is(verdict.kind === "denied" && verdict.code, 422);
  }
  assert.equal(ports.lookups, []);
  assert.equal(ports.reviews, []);
});

Checks("the places cap defaults to 64: 64 places of one name are inlined, 65 refused", async () => {
  for (const [count, expected] of [
    [64, "allowed"],
    [65, "denied"],
  ] as const) {
    const ports = fakePorts();
    const p = podWith((p) => (p.spec.containers = Array.from({ length: count }, (_, i) => ({ name: `c${i}`, securityContext: gmsa("webapp1-credspec") }))));
    const verdict = await expandCredSpecs(admission("CREATE", p), ports);
    assert.is(verdict.kind, expected, String(count));
    if (verdict.kind === "allowed") assert.is(verdict.patch.length, 64);
  }
});

Checks("mutate: refuses with 422 a pod whose inlined contents would pass the bound, and inlines them below it", async () => {
  const big = { ...credSpecFixture("webapp1-credspec").credspec, Padding: "x".repeat(100 * 1024) };
  const lookup = () => ({ kind: "found" as const, credspec: big });
  for (const [count, expected] of [
    [4, "allowed"],
    [8, "denied"],
  ] as const) {
    const ports = fakePorts({ lookup });
    const p = podWith((p) => (p.spec.containers = Array.from({ length: count }, (_, i) => ({ name: `c${i}`, securityContext: gmsa("webapp1-credspec") }))));
    const verdict = await expandCredSpecs(admission("CREATE", p), ports);
    assert.is(verdict.kind, expected, String(count));
    if (verdict.kind === "denied") {
      assert.is(verdict.code, 422);
      assert.match(verdict.message, `would add more than ${maxInlinedBytes / 1024} KiB to the pod`);
    }
  }
});

Checks.run();
