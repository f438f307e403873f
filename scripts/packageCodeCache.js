// Run by `npm run package` in a Node of its own, with no V8 flags: loads the unzipped package's
// entry point the way the Functions worker does (the worker's core API stubbed, so that the
// functions register and nothing else happens), then writes the V8 code cache of the bundle,
// which now holds every function that loading compiled. Usage: node packageCodeCache.js <main.js>
"use strict";
const Module = require("node:module");
const { writeFileSync } = require("node:fs");
const { dirname, join } = require("node:path");

const [main] = process.argv.slice(2);
const stub = { setProgrammingModel() {}, registerFunction: () => ({ dispose() {} }), registerHook: () => ({ dispose() {} }), log() {} };
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === "@azure/functions-core" ? request : resolve.call(this, request, ...rest);
};
require.cache["@azure/functions-core"] = { id: "@azure/functions-core", filename: "@azure/functions-core", loaded: true, exports: stub };
const entry = require(main);
writeFileSync(join(dirname(main), "app.js.v8cache"), entry.createCodeCache());
