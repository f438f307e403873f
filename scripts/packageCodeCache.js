// Run by `npm run package` in a Node of its own, with no V8 flags: loads the package's entry point
// the way the Functions worker does (scripts/workerStandIn.js), then, when given a mutate review
// and the settings of the training stand-in in its environment (scripts/codeCacheTraining.ts), starts the app and
// answers that review, and writes the V8 code cache of the bundle, which now holds every function
// that loading and a first admission compiled. Usage: node packageCodeCache.js <main.js> [review.json]
"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const { dirname, join } = require("node:path");
const { invokeHttp, standInCore, startApp } = require("./workerStandIn.js");

const [main, reviewFile] = process.argv.slice(2);

(async () => {
  const registered = standInCore();
  const entry = require(main);
  if (reviewFile) {
    await startApp(registered, dirname(main));
    const response = await invokeHttp(registered, "mutate", { body: readFileSync(reviewFile, "utf8") });
    const patched = response.status === 200 && typeof JSON.parse(response.body).response?.patch === "string";
    if (!patched) throw new Error(`the training admission was not patched: ${response.status} ${String(response.body).slice(0, 300)}`);
  }
  writeFileSync(join(dirname(main), "app.js.v8cache"), entry.createCodeCache());
  // The app's cluster client is still watching the stand-in: nothing else is to be done here.
  process.exit(0);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
