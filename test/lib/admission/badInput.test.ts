import { suite } from "uvu";
import * as assert from "uvu/assert";
import { exchangeAdmission, type HttpCall } from "../../../lib/admission/httpExchange.js";
import { expandCredSpecs } from "../../../lib/gmsa/expandCredSpecs.js";
import { validatePod } from "../../../lib/gmsa/validatePod.js";
import { fakePorts } from "../../support/fakePorts.js";
import { gmsa, pod, review } from "../../support/reviews.js";

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

BadInput("1 000 randomly broken reviews each get a well-formed answer", async () => {
  const random = generator(689);
  const base = pod();
  base.spec.securityContext = gmsa("webapp1-credspec");
  base.spec.initContainers = [{ name: "setup", securityContext: gmsa("payroll-gmsa", "{}") }];
  base.metadata.annotations = { "iis.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" };
  const ports = fakePorts();
  const deps = { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 1000 };
  const counts: Record<number, number> = {};
  for (let i = 0; i < 1000; i++) {
    const original = review(random() < 0.5 ? "CREATE" : "UPDATE", base, { oldObject: base });
    const broken = mutate(original, random);
    const { reply } = await exchangeAdmission(call(JSON.stringify(broken)), random() < 0.5 ? expandCredSpecs : validatePod, deps);
    counts[reply.status] = (counts[reply.status] ?? 0) + 1;
    assert.ok(reply.status === 200 || reply.status === 400, `case ${i}: status ${reply.status}`);
    if (reply.status === 200) {
      const answer = JSON.parse(reply.body).response;
      assert.type(answer.uid, "string", `case ${i}`);
      assert.type(answer.allowed, "boolean", `case ${i}`);
      if (!answer.allowed) assert.type(answer.status.message, "string");
    }
  }
  assert.ok((counts[200] ?? 0) > 100 && (counts[400] ?? 0) > 100, `both kinds of answer were exercised: ${JSON.stringify(counts)}`);
});

BadInput("random bytes never crash the exchange", async () => {
  const random = generator(42);
  const ports = fakePorts();
  const deps = { credSpecs: ports.credSpecs, authorizer: ports.authorizer, settings: ports.settings, budgetMs: 1000 };
  for (let i = 0; i < 300; i++) {
    const bytes = Buffer.from(Array.from({ length: Math.floor(random() * 200) }, () => Math.floor(random() * 256)));
    const { reply } = await exchangeAdmission({ ...call(""), readBody: async () => bytes }, expandCredSpecs, deps);
    assert.is(reply.status, 400);
  }
});

BadInput.run();
