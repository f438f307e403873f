import { HttpRequest, InvocationContext } from "@azure/functions";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { stopAdmissionRuntime } from "../../lib/app/runtime.js";

/** GET /health is anonymous: it says whether the instance is ready, and nothing about why not. */
const Health = suite<{ saved: NodeJS.ProcessEnv; logged: string[] }>("GET /health", { saved: {}, logged: [] });

// A kubeconfig path that stands for internal detail: a host name and a file layout.
const internalDetail = "aks-prod-4f2a.privatelink.westeurope.azmk8s.io";

// uvu loads every test file before it runs any, all in one process. Importing functions/health at
// the top would register it with the real `app` before a local Functions host in an earlier suite
// could load it, and that host would then serve no /health. So it is loaded when this suite runs,
// and forgotten after, for a host in a later suite to load afresh.
const healthModule = "../../functions/health.js";
let health: typeof import("../../functions/health.js").health;

Health.before(() => {
  ({ health } = require(healthModule) as typeof import("../../functions/health.js"));
});

Health.before.each(async (context) => {
  context.saved = { ...process.env };
  context.logged = [];
  for (const name of Object.keys(process.env)) if (name.startsWith("GMSA_") || name === "KUBECONFIG") delete process.env[name];
  await stopAdmissionRuntime();
});

Health.after.each(async (context) => {
  await stopAdmissionRuntime();
  for (const name of Object.keys(process.env)) if (!(name in context.saved)) delete process.env[name];
  Object.assign(process.env, context.saved);
});

function invocation(logged: string[]): InvocationContext {
  return new InvocationContext({ invocationId: "health-test", functionName: "health", logHandler: (_level, ...args) => logged.push(args.map(String).join(" ")) });
}

Health("an instance that cannot start answers 503 unavailable, and only the log has the reason", async (context) => {
  process.env.KUBECONFIG = `/nonexistent/${internalDetail}/kubeconfig`;
  const response = await health(new HttpRequest({ method: "GET", url: "https://localhost/health" }), invocation(context.logged));
  assert.is(response.status, 503);
  assert.equal(response.jsonBody, { status: "unavailable" });
  assert.not.match(JSON.stringify(response), internalDetail);
  assert.ok(
    context.logged.some((line) => line.includes(internalDetail)),
    `the log keeps the reason: ${JSON.stringify(context.logged)}`,
  );
});

Health("a bad setting is not echoed either", async (context) => {
  process.env.KUBECONFIG = "/k";
  process.env.GMSA_API_TIMEOUT_MS = "secret-value";
  const response = await health(new HttpRequest({ method: "GET", url: "https://localhost/health" }), invocation(context.logged));
  assert.equal({ status: response.status, body: response.jsonBody }, { status: 503, body: { status: "unavailable" } });
  assert.ok(context.logged.some((line) => line.includes("GMSA_API_TIMEOUT_MS")));
});

Health.after(() => {
  delete require.cache[require.resolve(healthModule)];
});

Health.run();
