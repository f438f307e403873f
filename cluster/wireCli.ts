import { defaultKubeConfig, runWire } from "./wire.js";

/** `npm run wire -- ...`: wires a cluster to the webhooks (see docs/wiring.md). */
void runWire(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  kubeConfig: defaultKubeConfig,
  env: process.env,
}).then((code) => {
  process.exitCode = code;
});
