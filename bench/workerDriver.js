// The production path, for `npm run bench`: a deployment package loaded as the Functions worker
// loads it (scripts/workerStandIn.js: the core API, the package's main, its appStart hooks) and
// invoked as the worker invokes it, through the programming model the package's @azure/functions
// registered (an RPC invocation turned into its HttpRequest, the handler, its response turned back
// into the RPC answer). Run once for the product's package and once for a minimal app that does the
// least a webhook does, in processes of their own, pinned to one core by the bench.
//
// node bench/workerDriver.js <packageDir> <bodies.json> <in flight> <invocations>
// (the app's settings come in the environment, as the Function App's do)
// (no V8 flags: the package's code cache is accepted only under the flags that made it; the full
// collection before the memory reading is enabled once the package has loaded)
// bodies.json: {"<function name>": "<request body>", ...}. Prints one JSON object:
//   startedMs: process start → functions registered; firstAnswerMs: → first admission answered;
//   per function: cpuUs (CPU time, user and system, per invocation), p50Ms, p99Ms;
//   rssMiB, heapMiB (in use), heapCommittedMiB and externalMiB after the invocations and a full collection.
"use strict";
const { readFileSync } = require("node:fs");
const { performance } = require("node:perf_hooks");
const { invokeHttp, requireMain, standInCore, startApp } = require("../scripts/workerStandIn.js");

const [packageDir, bodiesFile, inFlightText, countText] = process.argv.slice(2);
if (!packageDir || !bodiesFile) throw new Error("usage: workerDriver.js <packageDir> <bodies.json> <in flight> <invocations>");
const inFlight = Number(inFlightText ?? 16);
const count = Number(countText ?? 4000);
const warmup = Math.min(2000, count);

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

async function main() {
  const registered = standInCore();
  const entry = requireMain(packageDir);
  const startedMs = performance.now();
  await startApp(registered, packageDir);
  const bodies = JSON.parse(readFileSync(bodiesFile, "utf8"));
  const names = Object.keys(bodies);
  const invoke = async (name) => {
    const answer = await invokeHttp(registered, name, { body: bodies[name] });
    if (answer.status !== 200) throw new Error(`${name} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    return answer;
  };
  await invoke(names[0]);
  const firstAnswerMs = performance.now();
  // The product lists its credential specs after its first admission: wait until a lookup no
  // longer reaches the API server (its /metrics says so), as a warm instance is.
  if (registered.functions.some((f) => f.metadata.name === "metrics")) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const metrics = JSON.parse((await invokeHttp(registered, "metrics", { method: "GET" })).body);
      if (metrics.credSpecCache === undefined || metrics.credSpecCache?.synced) break;
      if (Date.now() > deadline) throw new Error("the credential spec cache did not list within 60 s");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  const functions = {};
  for (const name of names) {
    // In flight as the host hands them over: `inFlight` at a time, each slot taking the next.
    const run = async (n, latencies) => {
      let next = 0;
      const slot = async () => {
        while (next < n) {
          next += 1;
          const started = performance.now();
          await invoke(name);
          latencies?.push(performance.now() - started);
        }
      };
      await Promise.all(Array.from({ length: inFlight }, slot));
    };
    await run(warmup);
    const latencies = [];
    const cpu = process.cpuUsage();
    await run(count, latencies);
    const used = process.cpuUsage(cpu);
    latencies.sort((a, b) => a - b);
    functions[name] = { cpuUs: (used.user + used.system) / count, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
  }
  require("node:v8").setFlagsFromString("--expose-gc");
  require("node:vm").runInNewContext("gc")();
  const memory = process.memoryUsage();
  const codeCache = entry && typeof entry === "object" && "codeCache" in entry ? entry.codeCache : "none";
  process.stdout.write(
    `${JSON.stringify({ startedMs, firstAnswerMs, codeCache, functions, rssMiB: memory.rss / 1048576, heapMiB: memory.heapUsed / 1048576, heapCommittedMiB: memory.heapTotal / 1048576, externalMiB: memory.external / 1048576 })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
