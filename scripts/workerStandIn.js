// What the Functions worker does with a deployment package, as far as the package can tell: a core
// API module that collects registrations, then the package's main, its appStart hooks, and HTTP
// invocations whose body streams from a fetch Request, as the Functions library's HttpRequest reads
// it. Used by `npm run package` (scripts/packageCodeCache.js, to run an admission before keeping the
// code cache) and by the package's tests and the bench (test/package/coldStartDriver.js).
"use strict";
const Module = require("node:module");
const path = require("node:path");

/** Installs the stand-in core API; returns what the package registers through it. */
function standInCore() {
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
  return { functions, hooks };
}

/** Runs the appStart hooks the package registered, as the worker does before the first invocation. */
async function startApp(registered, packageDir) {
  for (const hook of registered.hooks.filter((h) => h.name === "appStart")) await hook.callback({ hookData: {}, appHookData: {}, functionAppDirectory: packageDir });
}

/** One HTTP invocation of a registered function, with the request the Functions library would build. */
async function invokeHttp(registered, functionName, request) {
  const target = registered.functions.find((f) => f.metadata.name === functionName);
  if (!target) throw new Error(`the package registers no function named ${functionName}`);
  const body = Buffer.from(request.body);
  const native = new Request(`https://localhost/${functionName}`, {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": String(body.length), ...(request.headers || {}) },
    body,
  });
  return target.handler(
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
    { invocationId: "stand-in", functionName, log() {}, info() {}, warn() {}, error: (...a) => console.error(...a), debug() {}, trace() {} },
  );
}

/** The manifest's main, required as the worker requires it. */
function requireMain(packageDir) {
  const manifest = require(path.join(packageDir, "package.json"));
  return require(path.join(packageDir, manifest.main));
}

module.exports = { standInCore, startApp, invokeHttp, requireMain };
