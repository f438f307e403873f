// The handler alone, for `npm run bench`: decode, policy, answer and log line of warm mutate and
// validate admissions, with no HTTP server, in a process of its own that runs the compiled
// JavaScript `npm start` serves (dist/local) with the V8 flags it is started with. The bench's
// own process would count what it carries besides (a TypeScript loader, the load generator's
// results, a heap of another shape) and runs without the serving process's flags.
//
// node [flags] bench/handlerDriver.js <kubeconfig> <mutate body file> <validate body file>
// prints {"mutate": µs, "validate": µs}: CPU time (user and system) per admission.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const { setTimeout: sleep } = require("node:timers/promises");

const local = join(__dirname, "..", "dist", "local", "lib");
const { exchangeAdmission } = require(join(local, "admission", "httpExchange.js"));
const { webhooks } = require(join(local, "app", "webhooks.js"));
const { admissionLogLine } = require(join(local, "observability", "admissionLog.js"));
const { readAdmissionSettings } = require(join(local, "settings", "admission.js"));
const { clusterPorts } = require(join(local, "kube", "clusterClient.js"));

const iterations = 20_000;
const warmup = 2_000;

async function main() {
  const [kubeconfig, mutateFile, validateFile] = process.argv.slice(2);
  if (!kubeconfig || !mutateFile || !validateFile) throw new Error("usage: handlerDriver.js <kubeconfig> <mutate body> <validate body>");
  const settings = readAdmissionSettings({ KUBECONFIG: kubeconfig });
  const cluster = await clusterPorts(settings, () => {});
  const deps = { credSpecs: cluster.credSpecs, authorizer: cluster.authorizer, settings, budgetMs: settings.admissionBudgetMs };
  let written = 0;
  const once = async (policy, bytes) => {
    const call = { method: "POST", contentType: "application/json", contentLength: String(bytes.byteLength), timeout: "10s", readBody: async () => bytes };
    const { reply, record } = await exchangeAdmission(call, policy, deps);
    if (!record || reply.status !== 200) throw new Error(`unexpected answer ${reply.status}: ${reply.body}`);
    // The log line is made, as every admission makes one; its length is kept so it is not dropped.
    written += admissionLogLine({ ...record, cluster: "default", webhook: "bench", latencyMs: 0, coldStart: false }).length;
  };
  const result = {};
  try {
    const bodies = { mutate: readFileSync(mutateFile), validate: readFileSync(validateFile) };
    await once(webhooks.mutate.policy, bodies.mutate);
    while (!cluster.cacheStatus()?.synced) await sleep(50);
    for (const [name, policy] of [
      ["mutate", webhooks.mutate.policy],
      ["validate", webhooks.validate.policy],
    ]) {
      // The authorization answer is cached for a few seconds: warm, and keep it warm while timing.
      for (let i = 0; i < warmup; i++) await once(policy, bodies[name]);
      const started = process.cpuUsage();
      for (let i = 0; i < iterations; i++) await once(policy, bodies[name]);
      const used = process.cpuUsage(started);
      result[name] = (used.user + used.system) / iterations;
    }
  } finally {
    await cluster.stop();
  }
  if (written === 0) throw new Error("no log line was made");
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
