import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { HttpCall } from "../../../lib/admission/httpExchange.js";
import { serveAdmission } from "../../../lib/app/serveAdmission.js";
import { stopAdmissionRuntime, useAdmissionRuntime, type AdmissionRuntime } from "../../../lib/app/runtime.js";
import { webhooks } from "../../../lib/app/webhooks.js";
import { fleetRouter, type FleetRouter } from "../../../lib/fleet/fleetRouter.js";
import clusterEvents from "../../../lib/observability/cluster-events.json";
import { readAdmissionSettings } from "../../../lib/settings/admission.js";

/**
 * Every request the function answers without judging a review writes one structured line
 * (gmsa.requestRefused, lib/observability/cluster-events.json) with its status and the cluster it
 * was for, so that the monitoring counts it: a judged admission writes its admission line instead.
 */
const Refused = suite("requests refused before a review is judged are counted");

interface Logged {
  readonly level: "info" | "warn" | "error";
  readonly line: string;
}

const member = {
  name: "default",
  credSpecs: { lookup: async () => ({ kind: "notFound" as const }) },
  authorizer: { mayUse: async () => ({ allowed: false as const }) },
  enter: () => undefined,
  leave: () => undefined,
};

function runtimeWith(router: FleetRouter<unknown>): AdmissionRuntime {
  return {
    mode: "single",
    settings: readAdmissionSettings({ KUBECONFIG: "/dev/null" }),
    members: new Map(),
    unavailable: new Map(),
    router,
    startedAt: Date.now(),
    stop: async () => undefined,
  } as unknown as AdmissionRuntime;
}

async function serve(call: Partial<HttpCall>, options: { router?: FleetRouter<unknown>; webhook?: keyof typeof webhooks; address?: Parameters<typeof serveAdmission>[3] } = {}) {
  useAdmissionRuntime(runtimeWith(options.router ?? fleetRouter("single", [{ name: "default", secrets: [], member }])));
  const logged: Logged[] = [];
  const body = Buffer.from(typeof call.readBody === "function" ? "" : "{not json");
  const reply = await serveAdmission(
    webhooks[options.webhook ?? "mutate"],
    { method: "POST", contentType: "application/json", contentLength: String(body.length), timeout: null, readBody: async () => body, ...call },
    { info: (line) => logged.push({ level: "info", line }), warn: (line) => logged.push({ level: "warn", line }), error: (line) => logged.push({ level: "error", line }) },
    options.address,
  );
  return { reply, logged };
}

function refusals(logged: readonly Logged[]): Record<string, unknown>[] {
  return logged
    .filter((entry) => entry.line.startsWith("{") && entry.line.includes(clusterEvents.requestRefused))
    .map((entry) => JSON.parse(entry.line) as Record<string, unknown>);
}

Refused.after(async () => {
  await stopAdmissionRuntime();
});

Refused("a body that is no JSON: 400, and one line with the status and the cluster", async () => {
  const { reply, logged } = await serve({});
  assert.is(reply.status, 400);
  const [line, ...more] = refusals(logged);
  assert.equal(more, []);
  assert.is(line?.["event"], clusterEvents.requestRefused);
  assert.is(line?.[clusterEvents.fields.status], 400);
  assert.is(line?.[clusterEvents.fields.cluster], "default");
  assert.is(line?.["webhook"], "mutate");
  assert.match(String(line?.[clusterEvents.fields.reason]), /not JSON/);
});

Refused("a GET: 405, counted the same way", async () => {
  const { reply, logged } = await serve({ method: "GET" });
  assert.is(reply.status, 405);
  assert.equal(
    refusals(logged).map((line) => line[clusterEvents.fields.status]),
    [405],
  );
});

Refused("an address that names no member: 404, counted under the name it gave, never with the secret of the path", async () => {
  const router = fleetRouter("fleet", [{ name: "alpha", secrets: ["alpha-secret"], member }]);
  const { reply, logged } = await serve({}, { router, address: { kind: "path", cluster: "omega", secret: "a-secret-in-the-path" } });
  assert.is(reply.status, 404);
  const lines = refusals(logged);
  assert.equal(
    lines.map((line) => [line[clusterEvents.fields.cluster], line[clusterEvents.fields.status]]),
    [["omega", 404]],
  );
  assert.not.ok(
    logged.some((entry) => entry.line.includes("a-secret-in-the-path")),
    "the path's secret is never written",
  );
});

Refused("the function's own failure: 500 with a correlation ID the log's two lines carry too", async () => {
  const router: FleetRouter<unknown> = {
    route: () => {
      throw new TypeError("cannot read properties of undefined (reading 'route')");
    },
  };
  const { reply, logged } = await serve({}, { router });
  assert.is(reply.status, 500);
  const id = /correlation ID ([0-9a-f-]{36})/.exec(reply.body)?.[1];
  assert.ok(id, reply.body);
  const [line] = refusals(logged);
  assert.is(line?.[clusterEvents.fields.status], 500);
  assert.is(line?.["correlationId"], id);
  assert.ok(logged.some((entry) => entry.level === "error" && entry.line.includes(`(correlation ID ${id})`) && entry.line.includes("TypeError")));
  assert.not.match(reply.body, "TypeError", "the caller sees no internals");
});

Refused("a judged admission writes its admission line and no refusal", async () => {
  const review = {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "5b0c1f7e-4b43-4d59-9d1c-2b1e0a8f6c11",
      kind: { group: "windows.k8s.io", version: "v1", kind: "GMSACredentialSpec" },
      resource: { group: "windows.k8s.io", version: "v1", resource: "gmsacredentialspecs" },
      operation: "DELETE",
      name: "webapp1",
      userInfo: { username: "admin" },
    },
  };
  const body = Buffer.from(JSON.stringify(review));
  const { reply, logged } = await serve({ contentLength: String(body.length), readBody: async () => body }, { webhook: "validate-credspec" });
  assert.is(reply.status, 200);
  assert.equal(refusals(logged), []);
  assert.ok(logged.some((entry) => entry.line.includes('"event":"gmsa.admission"')));
});

Refused.run();
