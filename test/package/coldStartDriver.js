// Loads an unpacked deployment package the way the Functions worker does (scripts/workerStandIn.js:
// a core API module that collects registrations, then the package's main, its appStart hooks, and
// one HTTP invocation of the named function). Prints the registrations and the response as JSON.
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
    return { name: metadata.name, route: trigger.route, methods: trigger.methods, authLevel: trigger.authLevel };
  });
  const response = await invokeHttp(registered, functionName, JSON.parse(requestJson));
  process.stdout.write(JSON.stringify({ loadedMs, codeCache: entry.codeCache, registered: functions, response }));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
