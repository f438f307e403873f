import fc from "fast-check";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFixture } from "../support/fixtures.js";

/**
 * Random admissions for the property suite: pods with settings at every kind of place, alpha
 * annotations, nulls, odd and repeated names, missing containers, huge lists; a random cluster
 * answering each name (found, missing, no credspec, 5xx, hang) and each `use` question
 * (allowed, denied, 5xx, hang); random UPDATE pairs and bindings.
 */
export const knownNames = ["webapp1-credspec", "payroll-gmsa", "empty-credspec", "ghost-spec"] as const;
const oddNames = ["", "Bad Name", "../secrets", "a".repeat(300), "x.y", "-x"];

export type SpecAnswer = "found" | "notFound" | "noCredspec" | "serverError" | "hang" | "deafHang";
export type UseAnswer = "allow" | "deny" | "serverError" | "hang";

export interface World {
  readonly specs: Readonly<Record<string, SpecAnswer>>;
  /** A spec's contents, when found: the example's, or a made-up one. */
  readonly credspecs: Readonly<Record<string, Record<string, unknown>>>;
  readonly serviceAccountUse: Readonly<Record<string, UseAnswer>>;
  readonly userUse: Readonly<Record<string, UseAnswer>>;
}

export interface AdmissionCase {
  readonly webhook: "mutate" | "validate";
  readonly settings: { readonly authorizeRequestingUser: boolean; readonly randomHostname: boolean; readonly maxCredSpecsPerPod: number };
  readonly world: World;
  readonly review: Record<string, unknown>;
}

const exampleSpec = (name: string) => credSpecFixture(name).credspec ?? { CmsPlugins: ["ActiveDirectory"] };

const anyName = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...knownNames) },
  { weight: 1, arbitrary: fc.constantFrom(...oddNames) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
);

const specAnswer: fc.Arbitrary<SpecAnswer> = fc.oneof(
  { weight: 12, arbitrary: fc.constant("found" as const) },
  { weight: 3, arbitrary: fc.constant("notFound" as const) },
  { weight: 2, arbitrary: fc.constant("noCredspec" as const) },
  { weight: 2, arbitrary: fc.constant("serverError" as const) },
  { weight: 1, arbitrary: fc.constantFrom("hang" as const, "deafHang" as const) },
);
const useAnswer: fc.Arbitrary<UseAnswer> = fc.oneof(
  { weight: 10, arbitrary: fc.constant("allow" as const) },
  { weight: 6, arbitrary: fc.constant("deny" as const) },
  { weight: 2, arbitrary: fc.constant("serverError" as const) },
  { weight: 1, arbitrary: fc.constant("hang" as const) },
);

function answers<T>(arb: fc.Arbitrary<T>): fc.Arbitrary<Record<string, T>> {
  return fc.tuple(...knownNames.map(() => arb)).map((values) => Object.fromEntries(knownNames.map((n, i) => [n, values[i]!])));
}

const world: fc.Arbitrary<World> = fc.record({
  specs: answers(specAnswer),
  credspecs: fc.record({
    "webapp1-credspec": fc.constant(exampleSpec("webapp1-credspec")),
    "payroll-gmsa": fc.constant(exampleSpec("payroll-gmsa")),
    "empty-credspec": fc.constant({ CmsPlugins: ["ActiveDirectory"], DomainJoinConfig: { Sid: "S-1-5-21" } }),
    "ghost-spec": fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
  }),
  serviceAccountUse: answers(useAnswer),
  userUse: answers(useAnswer),
});

/** Contents a pod may carry for a name: the spec in several spellings, or something else. */
function contentsFor(credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  const specOf = (name: string) => credspecs[name] ?? exampleSpec("webapp1-credspec");
  return fc.oneof(
    fc.constantFrom(...knownNames).map((n) => canonicalJson(specOf(n))),
    fc.constantFrom(...knownNames).map((n) => JSON.stringify(specOf(n), null, 2)),
    fc.constantFrom(...knownNames).map((n) => JSON.stringify(Object.fromEntries(Object.entries(specOf(n)).reverse()))),
    // The spec, with a key given twice: the last value is the spec's.
    fc.constantFrom(...knownNames).map((n) => `{"CmsPlugins":["Forged"],${canonicalJson(specOf(n)).slice(1)}`),
    fc.constantFrom("{}", "not json", "null", "[]", `${"[".repeat(20_000)}${"]".repeat(20_000)}`, '{"a":1,"a":1}'),
    fc.constantFrom(null, 7, true),
    fc.string({ maxLength: 20 }),
  );
}

function windowsOptions(credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(null, undefined, {}, "odd") },
    {
      weight: 6,
      arbitrary: fc.record(
        { gmsaCredentialSpecName: fc.oneof({ weight: 8, arbitrary: anyName }, { weight: 1, arbitrary: fc.constantFrom(null, 3) }), gmsaCredentialSpec: contentsFor(credspecs) },
        { requiredKeys: [] },
      ),
    },
  );
}

const containerNames = ["iis", "app", "setup", "debug", "", "a/b"];

function container(credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.record({ name: fc.constantFrom(...containerNames), securityContext: fc.option(fc.record({ windowsOptions: windowsOptions(credspecs) }), { nil: undefined }) }, { requiredKeys: ["name"] }) },
    { weight: 1, arbitrary: fc.constantFrom(null, {}, { name: 5 }) },
  );
}

function containerList(credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 10, arbitrary: fc.array(container(credspecs), { maxLength: 4 }) },
    { weight: 1, arbitrary: fc.constantFrom(null, undefined) },
    // A huge list: the same container many times.
    { weight: 1, arbitrary: fc.tuple(container(credspecs), fc.integer({ min: 100, max: 3000 })).map(([c, n]) => Array.from({ length: n }, () => c)) },
  );
}

function annotations(credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  const prefix = fc.oneof(
    { weight: 3, arbitrary: fc.constant("pod.alpha.windows.kubernetes.io/") },
    { weight: 6, arbitrary: fc.constantFrom(...containerNames, "ghost").map((c) => `${c}.container.alpha.windows.kubernetes.io/`) },
  );
  const entry = fc.oneof(
    fc.tuple(prefix.map((p) => `${p}gmsa-credential-spec-name`), anyName as fc.Arbitrary<unknown>),
    fc.tuple(prefix.map((p) => `${p}gmsa-credential-spec`), contentsFor(credspecs)),
    fc.tuple(fc.constantFrom("team", "example.com/gmsa-credential-spec-name"), fc.constant("x") as fc.Arbitrary<unknown>),
  );
  return fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(null, undefined) },
    { weight: 6, arbitrary: fc.array(entry, { maxLength: 5 }).map((entries) => Object.fromEntries(entries)) },
    // Thousands of names for containers the pod does not have.
    { weight: 1, arbitrary: fc.integer({ min: 17, max: 3000 }).map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`c${i}.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name`, `n${i}`]))) },
  );
}

function pod(credspecs: World["credspecs"]): fc.Arbitrary<Record<string, unknown>> {
  return fc.record({
    kind: fc.constant("Pod"),
    apiVersion: fc.constant("v1"),
    metadata: fc.record({ name: fc.constantFrom("web-0", "", undefined), namespace: fc.constant("apps"), annotations: annotations(credspecs) }, { requiredKeys: ["namespace"] }),
    spec: fc.record(
      {
        serviceAccountName: fc.constantFrom("web", "default", "", null),
        securityContext: fc.option(fc.record({ windowsOptions: windowsOptions(credspecs) }), { nil: undefined }),
        containers: containerList(credspecs),
        initContainers: containerList(credspecs),
        ephemeralContainers: containerList(credspecs),
        hostname: fc.constantFrom(undefined, "web"),
      },
      { requiredKeys: [] },
    ),
  });
}

/** An UPDATE's old pod: often the new one with a few places changed back, sometimes another pod. */
function oldPodFor(newPod: Record<string, unknown>, credspecs: World["credspecs"]): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constant(structuredClone(newPod)),
    pod(credspecs),
    fc.constant({ ...structuredClone(newPod), spec: { ...(newPod.spec as object), ephemeralContainers: [] } }),
  );
}

function reviewOf(operation: string, object: unknown, oldObject: unknown, userInfo: unknown, kind = "Pod"): Record<string, unknown> {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "00000000-0000-4000-8000-000000000000",
      kind: { group: "", version: "v1", kind },
      resource: { group: "", version: "v1", resource: "pods" },
      ...(kind === "Binding" ? { subResource: "binding" } : operation === "UPDATE" ? { subResource: "ephemeralcontainers" } : {}),
      name: "web-0",
      namespace: "apps",
      operation,
      userInfo,
      object,
      ...(oldObject === undefined ? {} : { oldObject }),
    },
  };
}

const userInfo = fc.constantFrom({ username: "alice", groups: ["developers"] }, {}, { username: "system:serviceaccount:kube-system:replicaset-controller" });

export const admissionCases: fc.Arbitrary<AdmissionCase> = world.chain((w) =>
  fc.record({
    webhook: fc.constantFrom("mutate" as const, "validate" as const),
    settings: fc.record({ authorizeRequestingUser: fc.boolean(), randomHostname: fc.boolean(), maxCredSpecsPerPod: fc.integer({ min: 1, max: 16 }) }),
    world: fc.constant(w),
    review: fc.oneof(
      { weight: 6, arbitrary: fc.tuple(pod(w.credspecs), userInfo).map(([p, u]) => reviewOf("CREATE", p, undefined, u)) },
      { weight: 3, arbitrary: fc.tuple(pod(w.credspecs), userInfo).chain(([p, u]) => oldPodFor(p, w.credspecs).map((old) => reviewOf("UPDATE", p, old, u))) },
      {
        weight: 1,
        arbitrary: fc.tuple(annotations(w.credspecs), userInfo).map(([a, u]) =>
          reviewOf("CREATE", { apiVersion: "v1", kind: "Binding", metadata: { name: "web-0", annotations: a }, target: { kind: "Node", name: "n1" } }, undefined, u, "Binding"),
        ),
      },
    ),
  }),
);
