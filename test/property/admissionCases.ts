import fc from "fast-check";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFixture } from "../support/fixtures.js";

/**
 * Random admissions for the property suite, of two kinds. Well-formed ones are what a real
 * cluster sends for GMSA pods: valid names that mostly exist and are mostly usable, contents
 * absent (for mutation to inline), right, or wrong, in a cluster that mostly answers; these
 * reach the checks that matter (an allowed validation, an inlining mutation, a 403, a contents
 * mismatch). Damaged ones stress the decoding: settings at every kind of place, alpha
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
  readonly settings: { readonly authorizeRequestingUser: boolean; readonly randomHostname: boolean; readonly maxCredSpecsPerPod: number; readonly maxPlacesPerPod: number };
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

const credspecs: fc.Arbitrary<World["credspecs"]> = fc.record({
  "webapp1-credspec": fc.constant(exampleSpec("webapp1-credspec")),
  "payroll-gmsa": fc.constant(exampleSpec("payroll-gmsa")),
  "empty-credspec": fc.constant({ CmsPlugins: ["ActiveDirectory"], DomainJoinConfig: { Sid: "S-1-5-21" } }),
  "ghost-spec": fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
});

const world: fc.Arbitrary<World> = fc.record({
  specs: answers(specAnswer),
  credspecs,
  serviceAccountUse: answers(useAnswer),
  userUse: answers(useAnswer),
});

// A cluster that mostly works: most names exist and are usable, a controlled share does not or
// does not answer, so a pod of two or three names is often admitted and often refused.
const calmSpecAnswer: fc.Arbitrary<SpecAnswer> = fc.oneof(
  { weight: 40, arbitrary: fc.constant("found" as const) },
  { weight: 2, arbitrary: fc.constant("notFound" as const) },
  { weight: 1, arbitrary: fc.constant("noCredspec" as const) },
  { weight: 2, arbitrary: fc.constantFrom("serverError" as const, "hang" as const, "deafHang" as const) },
);
const calmUseAnswer: fc.Arbitrary<UseAnswer> = fc.oneof(
  { weight: 30, arbitrary: fc.constant("allow" as const) },
  { weight: 5, arbitrary: fc.constant("deny" as const) },
  { weight: 1, arbitrary: fc.constantFrom("serverError" as const, "hang" as const) },
);

const calmWorld: fc.Arbitrary<World> = fc.record({
  specs: answers(calmSpecAnswer),
  credspecs,
  serviceAccountUse: answers(calmUseAnswer),
  userUse: answers(calmUseAnswer),
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
    {
      weight: 12,
      arbitrary: fc.record(
        { name: fc.constantFrom(...containerNames), securityContext: fc.option(fc.record({ windowsOptions: windowsOptions(credspecs) }), { nil: undefined }) },
        { requiredKeys: ["name"] },
      ),
    },
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
    fc.tuple(
      prefix.map((p) => `${p}gmsa-credential-spec-name`),
      anyName as fc.Arbitrary<unknown>,
    ),
    fc.tuple(
      prefix.map((p) => `${p}gmsa-credential-spec`),
      contentsFor(credspecs),
    ),
    fc.tuple(fc.constantFrom("team", "example.com/gmsa-credential-spec-name"), fc.constant("x") as fc.Arbitrary<unknown>),
  );
  return fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(null, undefined) },
    { weight: 6, arbitrary: fc.array(entry, { maxLength: 5 }).map((entries) => Object.fromEntries(entries)) },
    // Thousands of names for containers the pod does not have.
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 17, max: 3000 })
        .map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`c${i}.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name`, `n${i}`]))),
    },
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
  return fc.oneof(fc.constant(structuredClone(newPod)), pod(credspecs), fc.constant({ ...structuredClone(newPod), spec: { ...(newPod.spec as object), ephemeralContainers: [] } }));
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

/** Settings for one place of a well-formed pod: a known name, contents absent, right or wrong. */
function wellFormedOptions(w: World): fc.Arbitrary<{ gmsaCredentialSpecName: string; gmsaCredentialSpec?: string }> {
  return fc.constantFrom(...knownNames).chain((name) => {
    const spec = w.credspecs[name]!;
    const other = knownNames.find((n) => n !== name && canonicalJson(w.credspecs[n]!) !== canonicalJson(spec))!;
    return fc
      .oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        { weight: 3, arbitrary: fc.constant(canonicalJson(spec)) },
        { weight: 1, arbitrary: fc.constant(JSON.stringify(spec, null, 2)) },
        { weight: 2, arbitrary: fc.constant(canonicalJson(w.credspecs[other]!)) },
      )
      .map((contents) => ({ gmsaCredentialSpecName: name, ...(contents === undefined ? {} : { gmsaCredentialSpec: contents }) }));
  });
}

function wellFormedPlace(w: World): fc.Arbitrary<{ windowsOptions: { gmsaCredentialSpecName: string; gmsaCredentialSpec?: string } } | undefined> {
  return fc.option(
    wellFormedOptions(w).map((windowsOptions) => ({ windowsOptions })),
    { nil: undefined, freq: 3 },
  );
}

function wellFormedContainers(w: World, names: readonly string[], max: number): fc.Arbitrary<unknown[]> {
  return fc
    .subarray([...names], { minLength: 0, maxLength: max })
    .chain((chosen) =>
      fc.tuple(
        ...chosen.map((name) =>
          wellFormedPlace(w).map((securityContext) => ({ name, image: "mcr.microsoft.com/windows/nanoserver:ltsc2022", ...(securityContext ? { securityContext } : {}) })),
        ),
      ),
    );
}

/** A Windows pod as the API server sends it: unique container names, GMSA settings at any level. */
function wellFormedPod(w: World): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .record({
      podLevel: wellFormedPlace(w),
      containers: wellFormedContainers(w, ["iis", "app", "sidecar"], 3).filter((c) => c.length > 0),
      initContainers: wellFormedContainers(w, ["setup"], 1),
      ephemeralContainers: wellFormedContainers(w, ["debug"], 1),
      podAnnotation: fc.option(fc.constantFrom(...knownNames), { nil: undefined, freq: 6 }),
      // A container's alpha annotation, the debug container's included: the kubelet reads none for
      // an ephemeral container, which runs under the pod's spec whatever its annotation names.
      containerAnnotation: fc.option(fc.tuple(fc.constantFrom("iis", "app", "sidecar", "setup", "debug"), fc.constantFrom(...knownNames)), { nil: undefined, freq: 4 }),
    })
    .map(({ podLevel, containers, initContainers, ephemeralContainers, podAnnotation, containerAnnotation }) => ({
      kind: "Pod",
      apiVersion: "v1",
      metadata: {
        name: "web-0",
        namespace: "apps",
        ...(podAnnotation || containerAnnotation
          ? {
              annotations: {
                ...(podAnnotation ? { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": podAnnotation } : {}),
                ...(containerAnnotation ? { [`${containerAnnotation[0]}.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name`]: containerAnnotation[1] } : {}),
              },
            }
          : {}),
      },
      spec: {
        serviceAccountName: "web",
        ...(podLevel ? { securityContext: podLevel } : {}),
        containers,
        ...(initContainers.length > 0 ? { initContainers } : {}),
        ...(ephemeralContainers.length > 0 ? { ephemeralContainers } : {}),
      },
    }));
}

/** The pod before its ephemeral containers were added: what an ephemeralcontainers UPDATE carries. */
function withoutEphemeralContainers(p: Record<string, unknown>): Record<string, unknown> {
  const { ephemeralContainers: _added, ...spec } = p.spec as Record<string, unknown>;
  return { ...p, spec };
}

const wellFormedCases: fc.Arbitrary<AdmissionCase> = calmWorld.chain((w) =>
  fc.record({
    webhook: fc.constantFrom("mutate" as const, "validate" as const),
    settings: fc.record({
      authorizeRequestingUser: fc.boolean(),
      randomHostname: fc.boolean(),
      maxCredSpecsPerPod: fc.constantFrom(16, 16, 16, 2),
      maxPlacesPerPod: fc.constantFrom(64, 64, 64, 3),
    }),
    world: fc.constant(w),
    review: fc.oneof(
      { weight: 4, arbitrary: wellFormedPod(w).map((p) => reviewOf("CREATE", p, undefined, { username: "alice", groups: ["developers"] })) },
      {
        weight: 1,
        arbitrary: wellFormedPod(w).map((p) => {
          const after = {
            ...p,
            spec: {
              ...(p.spec as object),
              ephemeralContainers: [{ name: "debug", image: "x", ...((p.spec as { ephemeralContainers?: Array<{ securityContext?: unknown }> }).ephemeralContainers?.[0] ?? {}) }],
            },
          };
          return reviewOf("UPDATE", after, withoutEphemeralContainers(p), { username: "alice", groups: ["developers"] });
        }),
      },
    ),
  }),
);

const damagedCases: fc.Arbitrary<AdmissionCase> = world.chain((w) =>
  fc.record({
    webhook: fc.constantFrom("mutate" as const, "validate" as const),
    settings: fc.record({
      authorizeRequestingUser: fc.boolean(),
      randomHostname: fc.boolean(),
      maxCredSpecsPerPod: fc.integer({ min: 1, max: 16 }),
      maxPlacesPerPod: fc.integer({ min: 1, max: 64 }),
    }),
    world: fc.constant(w),
    review: fc.oneof(
      { weight: 6, arbitrary: fc.tuple(pod(w.credspecs), userInfo).map(([p, u]) => reviewOf("CREATE", p, undefined, u)) },
      { weight: 3, arbitrary: fc.tuple(pod(w.credspecs), userInfo).chain(([p, u]) => oldPodFor(p, w.credspecs).map((old) => reviewOf("UPDATE", p, old, u))) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(annotations(w.credspecs), userInfo)
          .map(([a, u]) =>
            reviewOf("CREATE", { apiVersion: "v1", kind: "Binding", metadata: { name: "web-0", annotations: a }, target: { kind: "Node", name: "n1" } }, undefined, u, "Binding"),
          ),
      },
    ),
  }),
);

export const admissionCases: fc.Arbitrary<AdmissionCase> = fc.oneof({ weight: 3, arbitrary: wellFormedCases }, { weight: 2, arbitrary: damagedCases });
