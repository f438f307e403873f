// The production path, for `npm run bench`: a deployment package loaded as the Functions worker
// loads it (scripts/workerStandIn.js: the core API, the package's main, its appStart hooks) and
// invoked as the worker invokes it, through the programming model the package's @azure/functions
// registered (an RPC invocation turned into its HttpRequest, the handler, its response turned back
// into the RPC answer). Run once for the product's package and once for a minimal app that does the
// least a webhook does, in processes of their own, pinned to one core by the bench.
//
// node bench/workerDriver.js <packageDir> <bodies.json> <in flight> <invocations>
// (0 invocations: a start alone, up to the first admission answered; it prints startedMs,
// firstAnswerMs, codeCache and constrainedMiB only)
// (the app's settings come in the environment, as the Function App's do)
// (no V8 flags: the package's code cache is accepted only under the flags that made it; the full
// collection before the memory reading is enabled once the package has loaded)
// bodies.json: {"<function name>": "<request body>", ...}. Prints one JSON object:
//   startedMs: process start → functions registered; firstAnswerMs: → first admission answered;
//   per function: cpuUs (CPU time, user and system, per invocation), p50Ms, p99Ms;
//   rssMiB, heapMiB (in use), heapCommittedMiB and externalMiB after the invocations and a full collection;
//   peakRssMiB, the most the process held resident at any time; heldRssMiB, resident once V8 has
//   also given back the free pages it keeps for reuse (a last-resort collection, as under memory pressure);
//   constrainedMiB, the memory Node was given (its cgroup's limit, as process.constrainedMemory()
//   reads it), and heapLimitMiB, the heap size V8 chose from it.
// With BENCH_PROFILE_DIR set, writes CPU profiles there: the start to the first answer, and each
// function's timed invocations (<app>-<start|function>.cpuprofile, <app> the package folder's name).
"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const { basename, join } = require("node:path");
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

/** Starts a CPU profile when BENCH_PROFILE_DIR is set; the function returned stops it and writes it there. */
function profile(label) {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return async () => {};
  const session = new (require("node:inspector").Session)();
  session.connect();
  const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))));
  // Both posted at once: the session handles them in order before this returns, so the profile
  // covers what runs next even when that is synchronous (loading the package).
  const started = Promise.all([post("Profiler.enable"), post("Profiler.start")]);
  return async () => {
    await started;
    const { profile: taken } = await post("Profiler.stop");
    session.disconnect();
    writeFileSync(join(dir, `${basename(packageDir)}-${label}.cpuprofile`), JSON.stringify(taken));
  };
}

async function main() {
  const startProfile = profile("start");
  const registered = standInCore();
  const entry = requireMain(packageDir);
  const startedMs = performance.now();
  await startApp(registered, packageDir);
  const bodies = JSON.parse(readFileSync(bodiesFile, "utf8"));
  const names = Object.keys(bodies);
  const invoke = async (name) => {
    const answer = await invokeHttp(registered, name, { body: bodies[name] });
    if (answer.status !== 200) throw new Error(`${name} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    // Every figure is of an admission allowed: a refusal (a 503 of an overloaded instance, say)
    // takes another path, and counted as an answer it would flatter the figures.
    if (!answer.body.includes('"allowed":true')) throw new Error(`${name} did not allow the admission: ${answer.body.slice(0, 300)}`);
    return answer;
  };
  await invoke(names[0]);
  const firstAnswerMs = performance.now();
  await startProfile();
  const codeCache = entry && typeof entry === "object" && "codeCache" in entry ? entry.codeCache : "none";
  if (count === 0) {
    // A start alone: its figures are all this run is for.
    process.stdout.write(`${JSON.stringify({ startedMs, firstAnswerMs, codeCache, constrainedMiB: process.constrainedMemory() / 1048576 })}\n`);
    return;
  }
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
    // One first, alone: it fills the caches a warm instance has (the credential spec's use answer
    // among them) before invocations come in flight. Sixteen at once on a cold use answer would
    // all wait on one access review, past what one namespace may hold on the API server (12 of
    // an instance's 16), and the product sheds the rest by design.
    await invoke(name);
    await run(warmup);
    const latencies = [];
    const stopProfile = profile(name);
    const cpu = process.cpuUsage();
    await run(count, latencies);
    const used = process.cpuUsage(cpu);
    await stopProfile();
    latencies.sort((a, b) => a - b);
    functions[name] = { cpuUs: (used.user + used.system) / count, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99) };
  }
  require("node:v8").setFlagsFromString("--expose-gc");
  const gc = require("node:vm").runInNewContext("gc");
  gc();
  const mib = (bytes) => bytes / 1048576;
  const memory = process.memoryUsage();
  const peakRssMiB = mib(process.resourceUsage().maxRSS * 1024);
  // V8 keeps the pages a collection freed, for the heap to grow into again, until memory runs
  // short: a last-resort collection gives them back, which leaves what the app itself holds.
  gc({ type: "major", execution: "sync", flavor: "last-resort" });
  const heldRssMiB = mib(process.memoryUsage.rss());
  process.stdout.write(
    `${JSON.stringify({ startedMs, firstAnswerMs, codeCache, functions, rssMiB: mib(memory.rss), heapMiB: mib(memory.heapUsed), heapCommittedMiB: mib(memory.heapTotal), externalMiB: mib(memory.external), peakRssMiB, heldRssMiB, constrainedMiB: mib(process.constrainedMemory()), heapLimitMiB: mib(require("node:v8").getHeapStatistics().heap_size_limit) })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
