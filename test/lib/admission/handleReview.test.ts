import { suite } from "uvu";
import * as assert from "uvu/assert";
import { podWebhook, type PodPorts } from "../../../lib/gmsa/podWebhook.js";
import { handleReview, type ReviewBudget } from "../../../lib/admission/handleReview.js";
import { exchangeAdmission } from "../../../lib/admission/httpExchange.js";
import { parseGoDurationMs } from "../../../lib/admission/goDuration.js";
import { expandCredSpecs } from "../../../lib/gmsa/expandCredSpecs.js";
import { isSharedWorkCall, type PortCall } from "../../../lib/gmsa/ports.js";
import { ClusterUnavailableError } from "../../../lib/webhook/clusterUnavailable.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { fakePorts } from "../../support/fakePorts.js";
import { gmsa, pod, review } from "../../support/reviews.js";

function deps(overrides: Partial<PodPorts & ReviewBudget> = {}): PodPorts & ReviewBudget {
  const ports = fakePorts();
  return { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 2000, ...overrides };
}

function gmsaPod() {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  return p;
}

async function reviewed(body: unknown, d = deps(), timeoutMs?: number, policy = expandCredSpecs) {
  const outcome = await handleReview(body, podWebhook(policy), d, timeoutMs);
  if (outcome.kind !== "reviewed") throw new Error(`expected a review, got: ${outcome.message}`);
  return outcome;
}

const Envelope = suite("handleReview");

for (const apiVersion of ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]) {
  Envelope(`answers ${apiVersion} in ${apiVersion}, echoing the UID`, async () => {
    const body = review("CREATE", gmsaPod(), { apiVersion });
    const { review: answer } = await reviewed(body);
    assert.is(answer.apiVersion, apiVersion);
    assert.is(answer.kind, "AdmissionReview");
    assert.is(answer.response.uid, body.request.uid);
  });
}

Envelope("sends a JSON Patch, base64-encoded, only when there is one", async () => {
  const patched = (await reviewed(review("CREATE", gmsaPod()))).review.response;
  assert.is(patched.patchType, "JSONPatch");
  const ops = JSON.parse(Buffer.from(patched.patch!, "base64").toString());
  assert.is(ops[0].path, "/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec");
  const plain = (await reviewed(review("CREATE", pod()))).review.response;
  assert.equal(plain, { uid: plain.uid, allowed: true });
});

Envelope("names the credential specs used in audit annotations", async () => {
  const { review: answer } = await reviewed(review("CREATE", gmsaPod()), deps(), undefined, validatePod);
  assert.equal(answer.response.auditAnnotations, { credspecs: "webapp1-credspec" });
});

Envelope("turns a denial into a Failure status with the code and reason", async () => {
  const p = pod();
  p.spec.securityContext = gmsa("missing");
  const { review: answer, record } = await reviewed(review("CREATE", p), deps(), undefined, validatePod);
  assert.is(answer.response.allowed, false);
  assert.equal(answer.response.status, { status: "Failure", code: 422, reason: "Invalid", message: 'pod "web-0": GMSACredentialSpec "missing" does not exist' });
  assert.is(record.decision, "denied");
});

const notReviews: Array<[string, unknown]> = [
  ["null", null],
  ["an array", []],
  ["a review without a request", { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }],
  ["another kind", { apiVersion: "admission.k8s.io/v1", kind: "ConversionReview", request: {} }],
  [
    "an unknown version",
    { apiVersion: "admission.k8s.io/v2", kind: "AdmissionReview", request: { uid: "1", kind: { group: "", version: "v1", kind: "Pod" }, operation: "CREATE" } },
  ],
  ["a request without a uid", { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { kind: { group: "", version: "v1", kind: "Pod" }, operation: "CREATE" } }],
];
for (const [what, body] of notReviews) {
  Envelope(`reports ${what} as a bad request`, async () => {
    const outcome = await handleReview(body, podWebhook(expandCredSpecs), deps());
    assert.is(outcome.kind, "badRequest");
    assert.match(outcome.kind === "badRequest" ? outcome.message : "", /not an AdmissionReview/);
  });
}

Envelope("answers a review whose request is malformed past its UID as an AdmissionReview with that UID", async () => {
  const body = review("CREATE", gmsaPod());
  (body.request as { operation: unknown }).operation = 7;
  const { review: answer, record } = await reviewed(body);
  assert.is(answer.response.uid, body.request.uid);
  assert.is(answer.response.status?.code, 400);
  assert.match(answer.response.status?.message ?? "", /^the admission request is malformed: /);
  assert.is(record.decision, "invalid", "a malformed request is no policy denial");
});

const badPods: Array<[string, (r: ReturnType<typeof review>) => void, RegExp]> = [
  ["a Deployment", (r) => (r.request.kind = { group: "apps", version: "v1", kind: "Deployment" }), /expected a Pod or a Binding, got Deployment \(apps\)/],
  ["a CREATE without an object", (r) => delete (r.request as { object?: unknown }).object, /has no object/],
  ["an object whose kind is not Pod", (r) => ((r.request as { object: unknown }).object = { kind: "Secret" }), /object is not a Pod/],
  ["containers that are not a list", (r) => ((r.request as { object: unknown }).object = { kind: "Pod", spec: { containers: "iis" } }), /object is not a Pod/],
  [
    "a name that is not a string",
    (r) => ((r.request as { object: unknown }).object = { kind: "Pod", spec: { securityContext: { windowsOptions: { gmsaCredentialSpecName: 7 } } } }),
    /object is not a Pod/,
  ],
  ["an UPDATE without the old object", (r) => (r.request.operation = "UPDATE"), /has no oldObject/],
  ["an unknown operation", (r) => ((r.request as { operation: string }).operation = "PATCH"), /unknown operation "PATCH"/],
];
for (const [what, edit, message] of badPods) {
  Envelope(`refuses ${what} with 400, keeping the UID`, async () => {
    const body = review("CREATE", gmsaPod());
    edit(body);
    const { review: answer } = await reviewed(body);
    assert.is(answer.response.uid, body.request.uid);
    assert.is(answer.response.allowed, false);
    assert.is(answer.response.status?.code, 400);
    assert.match(answer.response.status?.message ?? "", message);
  });
}

Envelope("does not echo a large object back in an error", async () => {
  const body = review("CREATE", { kind: "Pod", spec: { containers: [{ name: 1, image: "x".repeat(100_000) }] } });
  const { review: answer } = await reviewed(body);
  assert.ok((answer.response.status?.message.length ?? 0) < 1000, `message of ${answer.response.status?.message.length} characters`);
});

Envelope("decodes tens of thousands of containers without trouble", async () => {
  const p = pod();
  p.spec.containers = Array.from({ length: 20_000 }, (_, i) => ({ name: `c${i}`, ...(i % 1000 === 0 ? { securityContext: gmsa("webapp1-credspec") } : {}) }));
  const ports = fakePorts();
  const { review: answer } = await reviewed(review("CREATE", p), deps({ credSpecs: ports.credSpecs }));
  assert.is(JSON.parse(Buffer.from(answer.response.patch!, "base64").toString()).length, 20);
  assert.equal(ports.lookups, ["webapp1-credspec"]);
});

Envelope("explains a pod that fails to decode in 20 000 places quickly, naming a few", async () => {
  const p = pod();
  p.spec.containers = Array.from({ length: 20_000 }, (_, i) => ({ name: `c${i}`, securityContext: { windowsOptions: { gmsaCredentialSpecName: 3 as never } } }));
  const started = performance.now();
  const { review: answer } = await reviewed(review("CREATE", p));
  const elapsed = performance.now() - started;
  assert.is(answer.response.status?.code, 400);
  assert.match(answer.response.status?.message ?? "", /^the request object is not a Pod: Expecting one of/);
  assert.ok((answer.response.status?.message.length ?? 0) < 1000);
  assert.ok(elapsed < 1000, `took ${elapsed.toFixed(0)} ms`);
});

Envelope("allows DELETE without an object", async () => {
  const body = review("DELETE", undefined, { oldObject: gmsaPod() });
  const { review: answer } = await reviewed(body);
  assert.equal(answer.response, { uid: body.request.uid, allowed: true });
});

Envelope("fails closed with 503 when the cluster cannot answer", async () => {
  const d = deps({
    credSpecs: {
      lookup: async () => {
        throw new ClusterUnavailableError("the Kubernetes API server answered 500 to GET", "serverError", 500);
      },
    },
  });
  const { review: answer, record } = await reviewed(review("CREATE", gmsaPod()), d);
  assert.is(answer.response.allowed, false);
  assert.is(answer.response.status?.code, 503);
  assert.match(answer.response.status?.message ?? "", /could not be checked: the Kubernetes API server answered with an error \(HTTP 500\)/);
  assert.is(record.decision, "error");
});

Envelope("every call an admission makes, through either port, carries its namespace and its deadline", async () => {
  const calls: Array<{ port: string; call: PortCall }> = [];
  const ports = fakePorts();
  const d = deps({
    credSpecs: { lookup: (name, call) => (calls.push({ port: "lookup", call }), ports.credSpecs.lookup(name, call)) },
    authorizer: { mayUse: (principal, namespace, name, call) => (calls.push({ port: "mayUse", call }), ports.authorizer.mayUse(principal, namespace, name, call)) },
  });
  const { review: answer } = await reviewed(review("CREATE", gmsaPod(), { namespace: "team-a" }), d);
  assert.is(answer.response.allowed, true);
  assert.equal(
    calls.map((c) => [c.port, c.call.namespace]),
    [
      ["mayUse", "team-a"],
      ["lookup", "team-a"],
    ],
  );
  // One call for the whole admission, within its deadline, and not one that skips the bound.
  assert.ok(calls.every(({ call }) => call === calls[0]!.call && !call.signal.aborted && !isSharedWorkCall(call)));
});

Envelope("fails closed with 504 within the time the API server allows, not the configured budget", async () => {
  const hang = { lookup: (_: string, { signal }: PortCall) => new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))) };
  const started = Date.now();
  const { review: answer } = await reviewed(review("CREATE", gmsaPod()), deps({ credSpecs: hang, budgetMs: 20_000 }), 600);
  const elapsed = Date.now() - started;
  assert.is(answer.response.status?.code, 504);
  assert.match(answer.response.status?.message ?? "", /did not answer within 350 ms/);
  assert.ok(elapsed < 5000, `answered after ${elapsed} ms`);
});

Envelope("refuses with 500 and keeps the UID when something unexpected fails", async () => {
  const broken = {
    lookup: async () => {
      throw new TypeError("bug");
    },
  };
  const body = review("CREATE", gmsaPod());
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void errors.push(args);
  try {
    const { review: answer, record } = await reviewed(body, deps({ credSpecs: broken }));
    assert.is(answer.response.uid, body.request.uid);
    assert.is(answer.response.allowed, false);
    assert.is(answer.response.status?.code, 500);
    assert.is(record.decision, "error");
    assert.match(String(errors[0]), /TypeError: bug/);
  } finally {
    console.error = original;
  }
});

Envelope("answers within the budget even when a port ignores the signal", async () => {
  const deaf = { lookup: () => new Promise<never>(() => {}) };
  const started = Date.now();
  const { review: answer } = await reviewed(review("CREATE", gmsaPod()), deps({ credSpecs: deaf, budgetMs: 300 }));
  assert.is(answer.response.status?.code, 504);
  assert.ok(Date.now() - started < 2000);
});

Envelope.run();

/** pods/binding CREATE, as the API server sends it: the binding's annotations land on the pod. */
function bindingReview(annotations?: Record<string, string>, operation = "CREATE") {
  const body = review("CREATE", undefined);
  return {
    ...body,
    request: {
      ...body.request,
      operation,
      kind: { group: "", version: "v1", kind: "Binding" },
      resource: { group: "", version: "v1", resource: "pods" },
      subResource: "binding",
      requestKind: { group: "", version: "v1", kind: "Binding" },
      name: "web-0",
      namespace: "apps",
      object: {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name: "web-0", namespace: "apps", ...(annotations ? { annotations } : {}) },
        target: { apiVersion: "v1", kind: "Node", name: "node-1" },
      },
    },
  };
}

const Bindings = suite("handleReview: pods/binding");

for (const key of [
  "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name",
  "pod.alpha.windows.kubernetes.io/gmsa-credential-spec",
  "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name",
  "ghost.container.alpha.windows.kubernetes.io/gmsa-credential-spec",
]) {
  Bindings(`validate refuses with 403 a binding that would set ${key}`, async () => {
    const body = bindingReview({ team: "web", [key]: "webapp1-credspec" });
    const ports = fakePorts();
    const { review: answer } = await reviewed(body, deps({ credSpecs: ports.credSpecs, authorizer: ports.authorizer }), undefined, validatePod);
    assert.is(answer.response.uid, body.request.uid);
    assert.is(answer.response.allowed, false);
    assert.is(answer.response.status?.code, 403);
    assert.match(answer.response.status?.message ?? "", `binding of pod "web-0": GMSA settings cannot be changed on an existing pod (the binding would set the annotation ${key})`);
    assert.equal(ports.lookups.length + ports.reviews.length, 0);
  });
}

Bindings("validate allows a binding without GMSA annotations", async () => {
  for (const annotations of [undefined, { team: "web", "example.com/gmsa-credential-spec-name": "x" }]) {
    const body = bindingReview(annotations);
    const { review: answer } = await reviewed(body, deps(), undefined, validatePod);
    assert.equal(answer.response, { uid: body.request.uid, allowed: true });
  }
});

Bindings("mutate allows any binding without a patch", async () => {
  const body = bindingReview({ "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" });
  const { review: answer } = await reviewed(body, deps(), undefined, expandCredSpecs);
  assert.equal(answer.response, { uid: body.request.uid, allowed: true });
});

Bindings("refuses with 400 a binding that is not one, or not a CREATE", async () => {
  const notBinding = bindingReview();
  (notBinding.request as { object: unknown }).object = { kind: "Binding", metadata: { annotations: { a: 7 } } };
  const update = bindingReview({}, "UPDATE");
  for (const [body, message] of [
    [notBinding, /object is not a Binding/],
    [update, /unexpected operation "UPDATE" on a Binding/],
  ] as const) {
    const { review: answer } = await reviewed(body, deps(), undefined, validatePod);
    assert.is(answer.response.status?.code, 400);
    assert.match(answer.response.status?.message ?? "", message);
  }
});

Bindings.run();

const Deep = suite("handleReview: deeply nested input");

// JSON.stringify itself recurses: the deep part is spliced into the text in place of a marker.
const deepMarker = "\u0000deep";
const nested = (_levels: 100_000): unknown => deepMarker;
const deepText = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
const deepPlaces: Array<[string, (r: any) => void]> = [
  ["an annotation value", (r) => (r.request.object.metadata.annotations = { note: nested(100_000) })],
  ["a credential spec name", (r) => (r.request.object.spec.securityContext = { windowsOptions: { gmsaCredentialSpecName: nested(100_000) } })],
  ["a container", (r) => (r.request.object.spec.containers = [nested(100_000)])],
  ["a field the policy does not read", (r) => (r.request.object.spec.overhead = nested(100_000))],
  ["the requesting user's extra", (r) => (r.request.userInfo = { username: "alice", extra: { a: nested(100_000) } })],
  ["the old object", (r) => ((r.request.operation = "UPDATE"), (r.request.oldObject = { kind: "Pod", spec: { containers: nested(100_000) } }))],
  [
    "a Binding's annotations",
    (r) => ((r.request.kind = { group: "", version: "v1", kind: "Binding" }), (r.request.object = { kind: "Binding", metadata: { annotations: nested(100_000) } })),
  ],
  ["credential spec contents", (r) => (r.request.object.spec.securityContext = gmsa("webapp1-credspec", `{"a":${"[".repeat(100_000)}${"]".repeat(100_000)}}`))],
  [
    "annotated contents",
    (r) =>
      (r.request.object.metadata.annotations = {
        "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec",
        "pod.alpha.windows.kubernetes.io/gmsa-credential-spec": `${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}`,
      }),
  ],
];
for (const [where, edit] of deepPlaces) {
  for (const [webhook, policy] of [
    ["mutate", expandCredSpecs],
    ["validate", validatePod],
  ] as const) {
    Deep(`${webhook}: 100 000 levels in ${where} get an AdmissionReview with the UID, not a crash`, async () => {
      const body: any = review("CREATE", gmsaPod(), { oldObject: gmsaPod() });
      edit(body);
      const text = JSON.stringify(body).replace(JSON.stringify(deepMarker), deepText);
      const { reply } = await exchangeAdmission(
        { method: "POST", contentType: "application/json", contentLength: null, timeout: "10s", readBody: async () => Buffer.from(text) },
        podWebhook(policy),
        deps(),
      );
      assert.is(reply.status, 200, reply.body.slice(0, 300));
      const answer = JSON.parse(reply.body).response;
      assert.is(answer.uid, body.request.uid);
      assert.ok(answer.status === undefined || answer.status.code < 500, JSON.stringify(answer.status));
    });
  }
}

Deep.run();

const Durations = suite("parseGoDurationMs");
const durations: Array<[string | null, number | undefined]> = [
  ["10s", 10_000],
  ["1m0s", 60_000],
  ["500ms", 500],
  ["1.5s", 1500],
  ["1h", 3_600_000],
  ["1m30s", 90_000],
  ["1500µs", 1.5],
  ["250us", 0.25],
  ["", undefined],
  [null, undefined],
  ["10", undefined],
  ["-1s", undefined],
  ["10s; DROP", undefined],
];
for (const [text, ms] of durations) Durations(`reads ${JSON.stringify(text)} as ${ms}`, () => assert.is(parseGoDurationMs(text), ms));
Durations.run();
