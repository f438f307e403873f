// Loads an unpacked deployment package the way the Functions worker does: a core API module
// that collects registrations, then the package's main, its appStart hooks, and one HTTP
// invocation of the named function. Prints the registrations and the response as JSON.
"use strict";
const Module = require("node:module");
const path = require("node:path");

const [packageDir, functionName, requestJson] = process.argv.slice(2);
const functions = [];
const hooks = [];
const core = {
  setProgrammingModel() {},
  registerFunction(metadata, handler) {
    functions.push({ metadata, handler });
    return { dispose() {} };
  },
  registerHook(name, callback) {
    hooks.push({ name, callback });
    return { dispose() {} };
  },
  log() {},
};
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === "@azure/functions-core" ? "@azure/functions-core" : resolve.call(this, request, ...rest);
};
require.cache["@azure/functions-core"] = { id: "@azure/functions-core", filename: "@azure/functions-core", loaded: true, exports: core };

(async () => {
  const started = process.hrtime.bigint();
  const manifest = require(path.join(packageDir, "package.json"));
  let entry;
  try {
    entry = require(path.join(packageDir, manifest.main));
  } catch (error) {
    // What the worker would be left with: the functions registered before the entry point threw.
    process.stdout.write(JSON.stringify({ loadError: String(error && error.message), registered: functions.map(({ metadata }) => metadata.name) }));
    process.exit(3);
  }
  const loadedMs = Number(process.hrtime.bigint() - started) / 1e6;
  for (const hook of hooks.filter((h) => h.name === "appStart")) await hook.callback({ hookData: {}, appHookData: {}, functionAppDirectory: packageDir });
  const registered = functions.map(({ metadata }) => {
    const trigger = Object.values(metadata.bindings).find((b) => b.type === "httpTrigger");
    return { name: metadata.name, route: trigger.route, methods: trigger.methods, authLevel: trigger.authLevel };
  });
  const target = functions.find((f) => f.metadata.name === functionName);
  const request = JSON.parse(requestJson);
  const body = Buffer.from(request.body);
  // The body streams from a fetch Request, as the Functions library's HttpRequest reads it.
  const native = new Request(`https://localhost/${functionName}`, {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": String(body.length), ...(request.headers || {}) },
    body,
  });
  const response = await target.handler(
    {
      method: "POST",
      url: native.url,
      headers: native.headers,
      query: new URLSearchParams(),
      // The route's {parameters}, as the Functions host fills them in.
      params: request.params || {},
      body: native.body,
      arrayBuffer: () => native.arrayBuffer(),
    },
    { invocationId: "cold-start", functionName, log() {}, info() {}, warn() {}, error: (...a) => console.error(...a), debug() {}, trace() {} },
  );
  process.stdout.write(JSON.stringify({ loadedMs, codeCache: entry.codeCache, registered, response }));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
