// The deployment package's entry point (its package.json `main`), which the Functions worker
// requires. It runs the bundle, app.js, as Node would require it, but compiled with the V8 code
// cache that `npm run package` made for it: parsing and compiling the bundle is most of what a
// new instance spends before its first admission. V8 checks the cache against the source and
// its own version and flags; a cache it rejects (another Node release, other V8 flags) costs one
// file read and the bundle compiles as it would without one. The package is read-only, so
// nothing is ever written here.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const { Script } = require("node:vm");

const filename = join(__dirname, "app.js");
let cachedData;
try {
  cachedData = readFileSync(`${filename}.v8cache`);
} catch {
  // No cache shipped: compile as usual.
}
// The bundle is written as the function Node wraps every CommonJS module in (scripts/package.ts),
// so that its text is the script's source as read: a copy with a wrapper added would be a second
// 2 MB string, held in V8's heap for as long as the app runs. Latin-1: the bundle is ASCII
// (scripts/package.ts checks), and Node makes a string of Latin-1 bytes faster than it decodes
// UTF-8, keeping one this large outside V8's heap.
const script = new Script(readFileSync(filename, "latin1"), { filename, ...(cachedData ? { cachedData } : {}) });
script.runInThisContext().call(module.exports, module.exports, require, module, filename, __dirname);

// For `npm run package`, which loads the bundle through here once and keeps what V8 compiled,
// and for the package's tests: whether this start used the cache.
module.exports.createCodeCache = () => script.createCachedData();
module.exports.codeCache = cachedData === undefined ? "none" : script.cachedDataRejected ? "rejected" : "used";
