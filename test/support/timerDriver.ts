// Registers the app's functions from source with @azure/functions against the worker stand-in
// (scripts/workerStandIn.js), then invokes one timer function as the Functions worker does and
// prints what it logged, one JSON array. Run in a process of its own (the library binds to the
// core API it finds when it loads): node --import tsx test/support/timerDriver.ts <function name>.
// The app's settings come in the environment, as the Function App's do.
import { readdirSync } from "node:fs";
import { join } from "node:path";

const { invokeTimer, standInCore, startApp } = require("../../scripts/workerStandIn.js") as {
  standInCore(): unknown;
  startApp(registered: unknown, dir: string): Promise<void>;
  invokeTimer(registered: unknown, name: string): Promise<Array<{ level: string; category: string; message: string }>>;
};

const [functionName] = process.argv.slice(2);
if (!functionName) throw new Error("usage: timerDriver.ts <function name>");
const registered = standInCore();
const functionsDir = join(__dirname, "..", "..", "functions");
// As the package's entry loads them: every module of functions/, by name.
for (const file of readdirSync(functionsDir)
  .filter((name) => name.endsWith(".ts"))
  .sort())
  require(join(functionsDir, file));

void (async () => {
  await startApp(registered, process.cwd());
  const logged = await invokeTimer(registered, functionName);
  process.stdout.write(JSON.stringify(logged), () => process.exit(0));
})().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
