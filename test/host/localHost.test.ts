import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixtures } from "../support/fixtures.js";
import { httpsCall, postReview } from "../support/httpsClient.js";
import { startLocalWebhook, type LocalWebhook } from "../support/localWebhook.js";
import { gmsa, pod, review } from "../support/reviews.js";

interface Context {
  api: FakeApiServer;
  webhook: LocalWebhook;
}

const Host = suite<Context>("local host, real client against a fake API server");

Host.before(async (context) => {
  context.api = await startFakeApiServer();
  // The fake serves single reads only: this suite looks at the direct path, without caches.
  context.webhook = await startLocalWebhook({
    KUBECONFIG: context.api.kubeconfig,
    GMSA_API_TIMEOUT_MS: "300",
    GMSA_ADMISSION_BUDGET_MS: "800",
    GMSA_CREDSPEC_CACHE: "false",
    GMSA_AUTH_CACHE_TTL_SECONDS: "0",
  });
});

Host.before.each((context) => {
  const { state, calls } = context.api;
  state.credSpecs = new Map(credSpecFixtures().map((c) => [c.metadata.name, c as unknown as Record<string, unknown>]));
  state.grants = new Set(["system:serviceaccount:apps:default|webapp1-credspec"]);
  state.failWith = undefined;
  state.failTimes = undefined;
  state.retryAfter = undefined;
  state.delayMs = undefined;
  calls.length = 0;
});

Host.after(async (context) => {
  await context.webhook.close();
  await context.api.close();
});

function gmsaPod(name = "webapp1-credspec") {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa(name);
  p.spec.containers.push({ name: "sidecar", securityContext: gmsa(name) });
  return p;
}

async function post(context: Context, path: string, body: unknown) {
  const reply = await postReview(`${context.webhook.server.url}${path}`, context.webhook.caPem, body);
  assert.is(reply.status, 200, reply.text);
  return JSON.parse(reply.text).response;
}

Host("mutate asks whether the service account may use the spec, then inlines its canonical bytes with one GET", async (context) => {
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  const ops = JSON.parse(Buffer.from(response.patch, "base64").toString());
  const expected = canonicalJson(credSpecFixtures().find((c) => c.metadata.name === "webapp1-credspec")!.credspec);
  assert.equal(
    ops.map((o: { value: string }) => o.value),
    [expected, expected],
  );
  assert.equal(
    context.api.calls.map((c) => `${c.method} ${c.path}`),
    ["POST /apis/authorization.k8s.io/v1/namespaces/apps/localsubjectaccessreviews", "GET /apis/windows.k8s.io/v1/gmsacredentialspecs/webapp1-credspec"],
  );
});

Host("mutate neither reads nor inlines a spec the service account may not use", async (context) => {
  context.api.state.grants.clear();
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  assert.equal(response.allowed, true);
  assert.is(response.patch, undefined);
  assert.equal(
    context.api.calls.map((c) => c.method),
    ["POST"],
  );
});

Host("validate sends a LocalSubjectAccessReview for the service account, with its groups", async (context) => {
  const response = await post(context, "/validate", review("CREATE", gmsaPod()));
  assert.is(response.allowed, true);
  const sar = context.api.calls.find((c) => c.path.endsWith("/localsubjectaccessreviews"));
  assert.is(sar?.path, "/apis/authorization.k8s.io/v1/namespaces/apps/localsubjectaccessreviews");
  assert.equal((sar?.body as { spec: unknown }).spec, {
    user: "system:serviceaccount:apps:default",
    groups: ["system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"],
    resourceAttributes: { namespace: "apps", verb: "use", group: "windows.k8s.io", resource: "gmsacredentialspecs", name: "webapp1-credspec" },
  });
});

Host("validate refuses with 403 when the API server says the service account may not use it", async (context) => {
  context.api.state.grants.clear();
  const response = await post(context, "/validate", review("CREATE", gmsaPod()));
  assert.is(response.status.code, 403);
  assert.match(response.status.message, /service account "default" in namespace "apps" is not authorized/);
});

Host("an unknown credential spec is told apart by the 404 status, not the message", async (context) => {
  context.api.state.grants.add("system:serviceaccount:apps:default|not-there");
  const response = await post(context, "/validate", review("CREATE", gmsaPod("not-there")));
  assert.is(response.status.code, 422);
  assert.match(response.status.message, /GMSACredentialSpec "not-there" does not exist/);
});

Host("fails closed with 503 when the API server answers 500", async (context) => {
  context.api.state.failWith = 500;
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  assert.is(response.allowed, false);
  assert.is(response.status.code, 503);
  assert.match(response.status.message, /answered with an error \(HTTP 500\)/);
});

Host("a refused pod is told a correlation ID, not the API server's address; the log line has both", async (context) => {
  context.webhook.logs.length = 0;
  context.api.state.failWith = 500;
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  const apiHost = new URL(context.api.url).host;
  const id = /correlation ID ([0-9a-f-]{36})/.exec(response.status.message)?.[1];
  assert.ok(id, response.status.message);
  assert.not.match(response.status.message, apiHost);
  const lines = context.webhook.logs.filter((l) => l.includes('"event":"gmsa.admission"'));
  assert.is(lines.length, 1);
  const record = JSON.parse(lines[0]!.slice(lines[0]!.indexOf("{")));
  assert.is(record.correlationId, id);
  assert.match(record.detail, "answered 500");
});

Host("tries a transient failure again within the budget", async (context) => {
  context.api.state.failWith = 503;
  context.api.state.failTimes = 1;
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  assert.is(response.allowed, true);
  assert.is(context.api.calls.length, 3, "one failed call, one retry, then the read");
});

Host("honours Retry-After only as far as the budget allows", async (context) => {
  context.api.state.failWith = 429;
  context.api.state.retryAfter = 30;
  const started = Date.now();
  const response = await post(context, "/mutate", review("CREATE", gmsaPod()));
  assert.is(response.status.code, 503);
  assert.match(response.status.message, /answered with an error \(HTTP 429\)/);
  assert.ok(Date.now() - started < 2000, "did not wait 30 s");
  assert.is(context.api.calls.length, 1);
});

Host("fails closed with a timeout well inside the budget when the API server hangs", async (context) => {
  context.api.state.delayMs = 5000;
  const started = Date.now();
  const response = await post(context, "/validate", review("CREATE", gmsaPod()));
  const elapsed = Date.now() - started;
  assert.is(response.status.code, 504);
  assert.match(response.status.message, /did not answer/);
  assert.ok(elapsed < 2000, `answered after ${elapsed} ms`);
});

Host("a pod without GMSA settings costs no API call", async (context) => {
  const response = await post(context, "/mutate", review("CREATE", pod()));
  assert.is(response.allowed, true);
  assert.is(response.patch, undefined);
  assert.equal(context.api.calls, []);
});

Host("writes one structured log line per admission, without credential spec contents", async (context) => {
  context.webhook.logs.length = 0;
  await post(context, "/mutate", review("CREATE", gmsaPod()));
  const lines = context.webhook.logs.filter((l) => l.includes('"event":"gmsa.admission"'));
  assert.is(lines.length, 1);
  const record = JSON.parse(lines[0]!.slice(lines[0]!.indexOf("{")));
  assert.is(record.webhook, "mutate");
  assert.is(record.decision, "patched");
  assert.equal(record.credSpecs, ["webapp1-credspec"]);
  assert.is(record.apiCalls, 2);
  assert.not.match(lines[0]!, /WebApplication1/);
});

const httpRules: Array<[string, { method?: string; path?: string; headers?: Record<string, string>; body?: string | Uint8Array }, number]> = [
  ["an unknown path", { path: "/nothing-here" }, 404],
  ["GET on a webhook", { method: "GET" }, 405],
  ["a body that is not JSON by content type", { headers: { "content-type": "text/plain" }, body: "{}" }, 415],
  ["no content type", { headers: {}, body: "{}" }, 415],
  ["malformed JSON", { body: '{"apiVersion":' }, 400],
  ["JSON that is not a review", { body: '{"hello":"world"}' }, 400],
  ["bytes that are not UTF-8", { body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]) }, 400],
  ["a body over 3 MiB", { body: `{"pad":"${"x".repeat(3 * 1024 * 1024)}"}` }, 413],
];
for (const [what, call, status] of httpRules) {
  Host(`answers ${what} with ${status}`, async (context) => {
    const reply = await httpsCall(`${context.webhook.server.url}${call.path ?? "/validate"}`, {
      ca: context.webhook.caPem,
      method: call.method ?? "POST",
      headers: call.headers ?? { "content-type": "application/json" },
      body: call.method === "GET" ? undefined : call.body,
    });
    assert.is(reply.status, status, reply.text);
  });
}

Host("accepts application/json with parameters", async (context) => {
  const reply = await httpsCall(`${context.webhook.server.url}/validate`, {
    ca: context.webhook.caPem,
    headers: { "content-type": "application/json; charset=utf-8" },
    body: JSON.stringify(review("CREATE", pod())),
  });
  assert.is(reply.status, 200);
});

Host("admissions answered in the same turn each get their own answer", async (context) => {
  // The local host writes the answers of one turn together: none may reach another's connection.
  const reviews = Array.from({ length: 24 }, (_, i) => review("CREATE", i % 2 === 0 ? gmsaPod() : pod()));
  const answers = await Promise.all(
    reviews.map(async (body, i) => {
      const reply = await httpsCall(`${context.webhook.server.url}${i % 3 === 0 ? "/validate" : "/mutate"}`, {
        ca: context.webhook.caPem,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        // An answer that is queued and never written fails here, not at the runner's watchdog.
        timeoutMs: 5_000,
      });
      assert.is(reply.status, 200, reply.text);
      return JSON.parse(reply.text).response;
    }),
  );
  answers.forEach((answer, i) => {
    assert.is(answer.uid, reviews[i]!.request.uid);
    assert.is(answer.allowed, true);
    assert.is(answer.patch !== undefined, i % 2 === 0 && i % 3 !== 0, `review ${i}: only a mutated GMSA pod gets a patch`);
  });
});

Host("a Host header the URL parser refuses changes no answer, on any path", async (context) => {
  // Targets are read against the server's own address: a bad Host may not make one path fail
  // where another is served.
  const url = context.webhook.server.url;
  const body = JSON.stringify(review("CREATE", gmsaPod()));
  for (const host of ["a b", "x:99999", "[", "gmsa.example:443"]) {
    const headers = { host, "content-type": "application/json" };
    const call = { ca: context.webhook.caPem, servername: "localhost", timeoutMs: 5_000 };
    const plain = await httpsCall(`${url}/mutate`, { ...call, headers, body });
    const parsed = await httpsCall(url, { ...call, headers, body, rawPath: "/./mutate" });
    const health = await httpsCall(`${url}/health`, { ...call, method: "GET", headers: { host } });
    assert.equal([plain.status, parsed.status, health.status], [200, 200, 200], `Host: ${host}`);
    assert.ok(JSON.parse(plain.text).response.patch, `Host: ${host}`);
    assert.ok(JSON.parse(parsed.text).response.patch, `Host: ${host}`);
  }
});

Host("GET /health answers 200 and GET /info names the product", async (context) => {
  const health = await httpsCall(`${context.webhook.server.url}/health`, { ca: context.webhook.caPem, method: "GET" });
  assert.is(health.status, 200);
  // Anonymous: ready or not, and nothing about the credential specs it holds.
  assert.equal(JSON.parse(health.text), { status: "ok" });
  const info = await httpsCall(`${context.webhook.server.url}/info`, { ca: context.webhook.caPem, method: "GET" });
  assert.is(info.status, 200);
  assert.is(JSON.parse(info.text).name, "gmsa-admission");
  assert.match(JSON.parse(info.text).node, /^v22\./);
});

Host.run();
