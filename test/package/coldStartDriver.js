// Loads an unpacked deployment package the way the Functions worker does (scripts/workerStandIn.js:
// a core API module that collects registrations, then the package's main, its appStart hooks, and
// one HTTP invocation of the named function through the package's programming model). Prints the
// registrations and the response as JSON.
"use strict";
const { invokeHttp, requireMain, standInCore, startApp } = require("../../scripts/workerStandIn.js");

const [packageDir, functionName, requestJson] = process.argv.slice(2);
const registered = standInCore();

(async () => {
  const started = process.hrtime.bigint();
  let entry;
  try {
    entry = requireMain(packageDir);
  } catch (error) {
    // What the worker would be left with: the functions registered before the entry point threw.
    process.stdout.write(JSON.stringify({ loadError: String(error && error.message), registered: registered.functions.map(({ metadata }) => metadata.name) }));
    process.exit(3);
  }
  const loadedMs = Number(process.hrtime.bigint() - started) / 1e6;
  await startApp(registered, packageDir);
  const functions = registered.functions.map(({ metadata }) => {
    const trigger = Object.values(metadata.bindings).find((b) => b.type === "httpTrigger");
    if (!trigger) {
      const timer = Object.values(metadata.bindings).find((b) => b.type === "timerTrigger");
      return { name: metadata.name, schedule: timer && timer.schedule };
    }
    return { name: metadata.name, route: trigger.route, methods: trigger.methods, authLevel: trigger.authLevel };
  });
  // "@path": the request is in that file (a body too large for a command line).
  const request = JSON.parse(requestJson.startsWith("@") ? require("node:fs").readFileSync(requestJson.slice(1), "utf8") : requestJson);
  const response = await invokeHttp(registered, functionName, request);
  // THEN_WHEN_SYNCED: once the credential spec cache says it has listed, the same invocation
  // again, and exit (the cache's watch would keep the process alive).
  let second;
  if (process.env.THEN_WHEN_SYNCED) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const metrics = JSON.parse((await invokeHttp(registered, "metrics", { method: "GET" })).body);
      if (metrics.credSpecCache?.synced) break;
      if (Date.now() > deadline) throw new Error(`the credential spec cache did not list within 10 s: ${JSON.stringify(metrics.credSpecCache)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    second = await invokeHttp(registered, functionName, request);
  }
  process.stdout.write(JSON.stringify({ loadedMs, codeCache: entry.codeCache, registered: functions, response, second }), () => {
    if (second) process.exit(0);
  });
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
