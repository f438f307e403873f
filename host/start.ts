import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter } from "node:path";
import { runtimeFromEnvironment, useAdmissionRuntime } from "../lib/app/runtime.js";
import { clusterSecretHeader } from "../lib/fleet/fleetRouter.js";
import { readCanarySettings } from "../lib/settings/canary.js";
import { loadFunctionsApp, runTimers, type RunningTimers } from "./functionsHost.js";
import { readHostSettings } from "./hostSettings.js";
import type { LocalCluster } from "./localCluster.js";
import { startLocalServer, type LocalServer } from "./localServer.js";
import { generateServingCertificate, servingCertificateFromFiles } from "./servingCertificate.js";

/**
 * `npm start`: the webhook on https://127.0.0.1:$PORT against the cluster in KUBECONFIG, or the
 * fleet GMSA_CLUSTERS names, or, with neither, against a local control plane started here with
 * the webhook wired into it; the app's timers run on their schedules.
 */
/** A port this process can listen on now, or why not: checked before anything slow starts. */
function portProblem(port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) =>
      resolve(
        error.code === "EADDRINUSE"
          ? `PORT ${port}: 127.0.0.1:${port} is already in use; set PORT to a free port (PORT=0 picks one)`
          : `PORT ${port}: cannot listen on 127.0.0.1:${port} (${error.code ?? error.message})`,
      ),
    );
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(undefined)));
  });
}

/** Every file KUBECONFIG names must exist: a typo would otherwise surface as a bare ENOENT later. */
function kubeconfigProblem(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const missing = value.split(delimiter).filter((path) => path !== "" && !existsSync(path));
  if (missing.length === 0) return undefined;
  return `KUBECONFIG names ${missing.join(", ")}, which does not exist: point it at a kubeconfig file, or unset it to start a local cluster`;
}

async function main(): Promise<void> {
  let host: ReturnType<typeof readHostSettings>;
  try {
    host = readHostSettings();
    const problem = kubeconfigProblem(process.env.KUBECONFIG) ?? (await portProblem(host.port));
    if (problem) throw new Error(problem);
  } catch (error) {
    process.stderr.write(`gmsa-admission: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
  const fleetGiven = Boolean(process.env.GMSA_CLUSTERS?.trim());
  const clusterGiven = fleetGiven || Boolean(process.env.KUBECONFIG || process.env.KUBERNETES_SERVICE_HOST || process.env.GMSA_CLUSTER_ACCESS);
  let local: LocalCluster | undefined;
  let server: LocalServer | undefined;
  let timers: RunningTimers | undefined;
  const stop = async (code: number) => {
    timers?.stop();
    await server?.close().catch(() => {});
    await local?.stop().catch(() => {});
    process.exit(code);
  };
  process.once("SIGINT", () => void stop(0)).once("SIGTERM", () => void stop(0));

  try {
    if (!clusterGiven) {
      say("KUBECONFIG is not set: starting a local control plane (the first run builds it from Go sources, which takes minutes)");
      // The control plane, its certificates and the manifests are loaded only when they are used,
      // so that serving a given cluster starts quickly and holds little memory.
      const { startLocalCluster } = await import("./localCluster.js");
      local = await startLocalCluster({ log: (line) => say(line) });
    }
    const env = local ? { ...process.env, KUBECONFIG: local.webhookKubeconfig, GMSA_CLUSTER_ACCESS: "kubeconfig" } : process.env;
    const { runtime, fleet } = await runtimeFromEnvironment(env);
    useAdmissionRuntime(runtime);
    const settings = fleet.shared;
    const tls = host.tlsFiles ? servingCertificateFromFiles(host.tlsFiles.cert, host.tlsFiles.key) : await generateServingCertificate();
    server = await startLocalServer({ host: "127.0.0.1", port: host.port, tls, functionKey: host.functionKey, log: logLine });
    if (local) {
      const { exampleObjects, wireLocalCluster } = await import("./localCluster.js");
      await wireLocalCluster(
        local,
        { url: server.url, caPem: tls.caPem, authorizeRequestingUser: settings.authorizeRequestingUser, audit: readCanarySettings().audit },
        exampleObjects("demo.yaml"),
      );
      process.stdout.write(`export KUBECONFIG=${local.adminKubeconfig}\n`);
      say(
        [
          `a local cluster is running at ${local.controlPlane.server} with the webhook wired in at ${server.url}; in another shell, after the export above:`,
          "  kubectl apply -f examples/pod.yaml              # expanded: kubectl get pod -n demo webapp -o yaml",
          "  kubectl apply -f examples/pod-not-allowed.yaml  # refused with 403",
          "  kubectl get gmsacredentialspecs",
          "Ctrl-C stops the webhook and the cluster.",
        ].join("\n"),
      );
    } else if (fleetGiven) {
      const ca = tls.caFile ? ` (CA bundle: ${tls.caFile})` : "";
      // The paths only: the secrets stay in the settings they came from.
      const lines = [...runtime.members.keys()].map(
        (name) => `  ${name}: ${server!.url}/clusters/${name}/{mutate,validate,validate-credspec} (secret in ${clusterSecretHeader}) or ${server!.url}/clusters/${name}/<secret>/…`,
      );
      // Kept out of service by their own settings: the warning lines above say why.
      for (const name of runtime.unavailable.keys()) lines.push(`  ${name}: not served (answers 503): its settings are wrong, see the gmsa.clusterUnavailable line above`);
      const served = runtime.members.size;
      process.stdout.write(`gmsa-admission ready for ${served} cluster${served === 1 ? "" : "s"}${ca}:\n${lines.join("\n")}\n`);
      if (served === 0) {
        // Running, so that /health and /metrics say the same, but nothing is admitted: say so loudly.
        const why = [...runtime.unavailable].map(([name, reason]) => `  ${name}: ${reason}`).join("\n");
        say(`gmsa-admission: NO CLUSTER IS SERVED: every member of GMSA_CLUSTERS is kept out of service by its settings, so every admission is refused with 503:\n${why}`);
      }
    } else {
      const ca = tls.caFile ? ` (CA bundle: ${tls.caFile})` : "";
      process.stdout.write(`gmsa-admission ready at ${server.url}/mutate, ${server.url}/validate and ${server.url}/validate-credspec${ca}\n`);
    }
    // The canary (and with GMSA_AUDIT the audit) on its schedule, as in the Function App.
    timers = runTimers((await loadFunctionsApp()).timers, logLine);
  } catch (error) {
    process.stderr.write(`gmsa-admission: ${error instanceof Error ? error.message : String(error)}\n`);
    await stop(1);
  }
}

function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

function logLine(level: string, message: string): void {
  (level === "error" || level === "warning" ? process.stderr : process.stdout).write(`${message}\n`);
}

void main();
