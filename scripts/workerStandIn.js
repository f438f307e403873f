// What the Functions worker does with a deployment package, as far as the package can tell: a core
// API module that collects registrations and the programming model, then the package's main, its
// appStart hooks, and HTTP invocations handed to that programming model as the worker hands them
// (an RPC invocation whose HTTP body is bytes; the Functions library in the bundle builds the
// request, calls the function, and turns its answer into the RPC response), and timer invocations. Used by
// `npm run package` (scripts/packageCodeCache.js, to run an admission before keeping the code
// cache) and by the package's tests and the bench (test/package/coldStartDriver.js).
"use strict";
const Module = require("node:module");
const path = require("node:path");

/** Installs the stand-in core API; returns what the package registers through it. */
function standInCore() {
  const functions = [];
  const hooks = [];
  const registered = { functions, hooks, programmingModel: undefined };
  const core = {
    setProgrammingModel(model) {
      registered.programmingModel = model;
    },
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
  return registered;
}

/** Runs the appStart hooks the package registered, as the worker does before the first invocation. */
async function startApp(registered, packageDir) {
  for (const hook of registered.hooks.filter((h) => h.name === "appStart")) await hook.callback({ hookData: {}, appHookData: {}, functionAppDirectory: packageDir });
}

/**
 * One HTTP invocation of a registered function, through the programming model the package's
 * Functions library registered, as the worker makes it. The request is shaped as the Functions
 * host sends it: headers, query and route parameters as nullable maps, the URL with its query
 * (the API server adds `?timeout=` to every webhook call; `request.query` replaces it), and no
 * body when there is none. Answers the function's HTTP response as status, headers and body text.
 */
async function invokeHttp(registered, functionName, request) {
  const target = registered.functions.find((f) => f.metadata.name === functionName);
  if (!target) throw new Error(`the package registers no function named ${functionName}`);
  if (!registered.programmingModel) throw new Error("the package set no programming model");
  const [trigger, binding] = Object.entries(target.metadata.bindings).find(([, b]) => b.type === "httpTrigger") ?? [];
  if (!trigger) throw new Error(`${functionName} has no HTTP trigger`);
  const body = Buffer.from(request.body ?? "");
  const invocationId = "stand-in";
  // The route's {parameters}, as the Functions host fills them in.
  const params = request.params || {};
  const routePath = (binding.route ?? functionName).replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(params[name] ?? ""));
  const query = new URLSearchParams(request.query ?? { timeout: "10s" });
  const headers = { "content-type": "application/json", "content-length": String(body.length), ...(request.headers || {}) };
  const nullable = (map) => Object.fromEntries(Object.entries(map).map(([key, value]) => [key, { value: String(value) }]));
  const http = {
    method: request.method ?? "POST",
    url: `https://localhost/${routePath}${query.size > 0 ? `?${query}` : ""}`,
    nullableHeaders: nullable(headers),
    nullableQuery: nullable(Object.fromEntries(query)),
    nullableParams: nullable(params),
    ...(body.length > 0 ? { body: { bytes: body } } : {}),
  };
  const log = (level, category, message) => {
    if (level === "error" || level === "critical") console.error(message);
  };
  const invocation = registered.programmingModel.getInvocationModel({
    invocationId,
    request: { invocationId, functionId: functionName, inputData: [{ name: trigger, data: { http } }], triggerMetadata: {} },
    metadata: target.metadata,
    state: undefined,
    log,
  });
  const { context, inputs } = await invocation.getArguments();
  const result = await invocation.invokeFunction(context, inputs, target.handler);
  const answer = (await invocation.getResponse(context, result)).returnValue?.http;
  if (!answer) throw new Error(`${functionName} answered no HTTP response`);
  return { status: Number(answer.statusCode), headers: answer.headers, body: Buffer.from(answer.body?.bytes ?? []).toString("utf8") };
}

/**
 * One timer invocation of a registered function, through the package's programming model, as the
 * worker makes it: the timer's data as JSON (not past due). Answers the lines the function logged,
 * each with its level and category as the worker hands them to the host.
 */
async function invokeTimer(registered, functionName) {
  const target = registered.functions.find((f) => f.metadata.name === functionName);
  if (!target) throw new Error(`the package registers no function named ${functionName}`);
  if (!registered.programmingModel) throw new Error("the package set no programming model");
  const [trigger] = Object.entries(target.metadata.bindings).find(([, b]) => b.type === "timerTrigger") ?? [];
  if (!trigger) throw new Error(`${functionName} has no timer trigger`);
  const invocationId = "stand-in";
  const timer = { Schedule: { AdjustForDST: true }, ScheduleStatus: null, IsPastDue: false };
  const logged = [];
  const invocation = registered.programmingModel.getInvocationModel({
    invocationId,
    request: { invocationId, functionId: functionName, inputData: [{ name: trigger, data: { json: JSON.stringify(timer) } }], triggerMetadata: {} },
    metadata: target.metadata,
    state: undefined,
    log: (level, category, message) => logged.push({ level, category, message }),
  });
  const { context, inputs } = await invocation.getArguments();
  const result = await invocation.invokeFunction(context, inputs, target.handler);
  await invocation.getResponse(context, result);
  return logged;
}

/** The manifest's main, required as the worker requires it. */
function requireMain(packageDir) {
  const manifest = require(path.join(packageDir, "package.json"));
  return require(path.join(packageDir, manifest.main));
}

module.exports = { standInCore, startApp, invokeHttp, invokeTimer, requireMain };
