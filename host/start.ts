import { createAdmissionRuntime, useAdmissionRuntime } from "../functions/runtime.js";
import { readAdmissionSettings, SettingsError } from "../lib/settings.js";
import { readHostSettings } from "./hostSettings.js";
import { startLocalServer } from "./localServer.js";
import { generateServingCertificate, servingCertificateFromFiles } from "./servingCertificate.js";

/** `npm start`: the webhook on https://127.0.0.1:$PORT against the cluster in KUBECONFIG. */
async function main(): Promise<void> {
  const host = readHostSettings();
  if (!process.env.KUBECONFIG && !process.env.KUBERNETES_SERVICE_HOST && !process.env.GMSA_CLUSTER_ACCESS) {
    throw new SettingsError(["KUBECONFIG is not set: point it at a cluster that serves the GMSACredentialSpec CRD"]);
  }
  useAdmissionRuntime(createAdmissionRuntime(readAdmissionSettings()));
  const tls = host.tlsFiles ? servingCertificateFromFiles(host.tlsFiles.cert, host.tlsFiles.key) : await generateServingCertificate();
  const server = await startLocalServer({ host: "127.0.0.1", port: host.port, tls, functionKey: host.functionKey, log: logLine });
  const ca = tls.caFile ? ` (CA bundle: ${tls.caFile})` : "";
  process.stdout.write(`gmsa-admission ready at ${server.url}/mutate and ${server.url}/validate${ca}\n`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once("SIGINT", stop).once("SIGTERM", stop);
}

function logLine(level: string, message: string): void {
  (level === "error" || level === "warning" ? process.stderr : process.stdout).write(`${message}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`gmsa-admission: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
