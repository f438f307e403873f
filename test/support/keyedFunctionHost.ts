import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { createFleetRuntime, useAdmissionRuntime } from "../../lib/app/runtime.js";
import { startLocalServer } from "../../host/localServer.js";
import { readFleetSettings } from "../../lib/settings/fleet.js";

/**
 * Run as a child process (see functionHostProcess.ts): the local host with the webhooks
 * registered as GMSA_REQUIRE_FUNCTION_KEY says and requiring GMSA_FUNCTION_KEY, as the Function
 * App does in relay mode. A process of its own because the functions modules read the setting
 * once, when they load: the other suites in the test process load them without it. It serves
 * what the settings name, as the Function App does: one cluster, or the fleet GMSA_CLUSTERS names.
 */
async function main(): Promise<void> {
  const env = process.env;
  // The members' own lines (a cluster client starting, stopping, failing) go where the host's do.
  const log = (level: string, message: string) => process.stdout.write(`${level} ${message}\n`);
  useAdmissionRuntime(await createFleetRuntime(readFleetSettings(env), { log: (level, message) => log(level === "warn" ? "warning" : "information", message) }));
  const server = await startLocalServer({
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: readFileSync(env.TLS_CERT_FILE ?? "", "utf8"), keyPem: readFileSync(env.TLS_KEY_FILE ?? "", "utf8") },
    functionKey: env.GMSA_FUNCTION_KEY,
    log,
  });
  // What reaches the function, for the relay's tests: each TLS handshake, and each request's
  // method, path and header names (never their values: one of them is the key).
  server.server.on("secureConnection", () => process.stdout.write(`observed ${JSON.stringify({ kind: "tlsHandshake" })}\n`));
  server.server.on("request", (req: IncomingMessage) => {
    const observed = { kind: "request", method: req.method, url: req.url, headers: Object.keys(req.headers).sort() };
    process.stdout.write(`observed ${JSON.stringify(observed)}\n`);
  });
  process.stdout.write(`ready ${server.url}\n`);
  process.once("SIGTERM", () => void server.close().then(() => process.exit(0)));
}

main().catch((error: unknown) => {
  process.stderr.write(`keyed function host: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
