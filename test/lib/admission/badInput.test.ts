import { suite } from "uvu";
import * as assert from "uvu/assert";
import { podWebhook } from "../../../lib/gmsa/podWebhook.js";
import { exchangeAdmission, type HttpCall } from "../../../lib/admission/httpExchange.js";
import { expandCredSpecs } from "../../../lib/gmsa/expandCredSpecs.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { fakePorts, fixtureLookup } from "../../support/fakePorts.js";
import { canonicalJson } from "../../../lib/gmsa/canonicalJson.js";
import { mutateViolations, validateViolations } from "../../support/admissionOracle.js";
import { credSpecFixture } from "../../support/fixtures.js";
import { gmsa, pod, review, type PodSpec } from "../../support/reviews.js";

const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const payroll = canonicalJson(credSpecFixture("payroll-gmsa").credspec);

/**
 * Whatever arrives, the answer is well-formed: an HTTP error, or a review that carries the UID.
 * A seeded generator mutates valid reviews at random paths, so failures can be replayed.
 */
function generator(seed: number) {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

const oddValues: unknown[] = [null, 0, -1, 1e309 === Infinity ? 1e300 : 0, "", "x", "Pod", true, [], {}, [null], { kind: "Pod" }, "\u0000", "a".repeat(1000), [{}], { name: 7 }];

function mutate(value: unknown, random: () => number, depth = 0): unknown {
  if (random() < 0.15 || depth > 12) return oddValues[Math.floor(random() * oddValues.length)];
  if (Array.isArray(value)) return value.map((v) => (random() < 0.3 ? mutate(v, random, depth + 1) : v));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (random() < 0.05) continue;
      out[k] = random() < 0.3 ? mutate(v, random, depth + 1) : v;
    }
    return out;
  }
  return value;
}

function call(body: string): HttpCall {
  return { method: "POST", contentType: "application/json", contentLength: null, timeout: "10s", readBody: async () => Buffer.from(body) };
}

const BadInput = suite("bad input");

// The pod's service account may use webapp1-credspec only: payroll-gmsa exists but is not its.
const mayUse = (name: string) => name === "webapp1-credspec";

function gmsaBase(): PodSpec {
  const base = pod();
  base.spec.securityContext = gmsa("webapp1-credspec");
  base.spec.containers.push({ name: "payroll", securityContext: gmsa("payroll-gmsa") });
  base.spec.initContainers = [{ name: "setup", securityContext: gmsa("webapp1-credspec", webapp) }];
  base.spec.ephemeralContainers = [{ name: "debug", securityContext: gmsa("webapp1-credspec", "{}") }];
  base.metadata.annotations = {
    "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec",
    "payroll.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa",
    "payroll.container.alpha.windows.kubernetes.io/gmsa-credential-spec": payroll,
  };
  return base;
}

BadInput("1 000 randomly broken reviews each get a well-formed answer, and none admits unchecked contents", async () => {
  const random = generator(689);
  const ports = fakePorts({ decide: (_, name) => ({ allowed: mayUse(name) }) });
  const world = { lookup: fixtureLookup(), mayUse };
  const deps = { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 1000 };
  const counts: Record<string, number> = {};
  for (let i = 0; i < 1000; i++) {
    const base = gmsaBase();
    const original = review(random() < 0.5 ? "CREATE" : "UPDATE", base, { oldObject: mutate(gmsaBase(), random) });
    const broken = mutate(original, random) as { request?: { operation?: unknown; object?: unknown; oldObject?: unknown } };
    const webhook = random() < 0.5 ? "mutate" : "validate";
    const { reply } = await exchangeAdmission(call(JSON.stringify(broken)), podWebhook(webhook === "mutate" ? expandCredSpecs : validatePod), deps);
    assert.ok(reply.status === 200 || reply.status === 400, `case ${i}: status ${reply.status}`);
    if (reply.status !== 200) {
      counts[reply.status] = (counts[reply.status] ?? 0) + 1;
      continue;
    }
    const answer = JSON.parse(reply.body).response;
    assert.type(answer.uid, "string", `case ${i}`);
    assert.type(answer.allowed, "boolean", `case ${i}`);
    if (!answer.allowed) assert.type(answer.status.message, "string");
    const key = `${webhook} ${answer.allowed ? (answer.patch ? "patched" : "allowed") : "refused"}`;
    counts[key] = (counts[key] ?? 0) + 1;
    if (!answer.allowed) continue;
    const request = broken.request!;
    const violations =
      webhook === "validate"
        ? validateViolations(String(request.operation), request.object, request.oldObject, world)
        : mutateViolations(request.object, answer.patch ? JSON.parse(Buffer.from(answer.patch, "base64").toString()) : [], world);
    assert.equal(violations, [], `case ${i}: ${webhook} allowed ${JSON.stringify(request).slice(0, 2000)}`);
  }
  for (const kind of ["400", "mutate patched", "validate allowed", "validate refused"]) {
    assert.ok((counts[kind] ?? 0) > 20, `every kind of answer was exercised: ${JSON.stringify(counts)}`);
  }
});

BadInput("random bytes never crash the exchange", async () => {
  const random = generator(42);
  const ports = fakePorts();
  const deps = { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 1000 };
  for (let i = 0; i < 300; i++) {
    const bytes = Buffer.from(Array.from({ length: Math.floor(random() * 200) }, () => Math.floor(random() * 256)));
    const { reply } = await exchangeAdmission({ ...call(""), readBody: async () => bytes }, podWebhook(expandCredSpecs), deps);
    assert.is(reply.status, 400);
  }
});

BadInput.run();
