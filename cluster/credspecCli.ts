import { readFileSync } from "node:fs";
import { runCredspec } from "./credspecCommand.js";
import { defaultKubeConfig } from "./wire.js";

/** `npm run credspec -- <command>`: generate, lint and grant credential specs (see README). */
void runCredspec(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  readFile: (path) => readFileSync(path === "-" ? 0 : path),
  kubeConfig: defaultKubeConfig,
}).then((code) => {
  process.exitCode = code;
});
