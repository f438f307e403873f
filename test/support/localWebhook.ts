import { createAdmissionRuntime, createFleetRuntime, stopAdmissionRuntime, useAdmissionRuntime, type AdmissionRuntime } from "../../lib/app/runtime.js";
import { startLocalServer, type LocalServer } from "../../host/localServer.js";
import { generateServingCertificate, type ServingCertificate } from "../../host/servingCertificate.js";
import { readAdmissionSettings, type AdmissionSettings } from "../../lib/settings/admission.js";
import { readFleetSettings, type FleetSettings } from "../../lib/settings/fleet.js";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The local host serving the Functions app against a given kubeconfig, as `npm start` does. */
export interface LocalWebhook {
  readonly server: LocalServer;
  readonly caPem: string;
  readonly tls: ServingCertificate;
  readonly logs: string[];
  /** What the webhook was started with (the wiring grants its role what these checks need). */
  readonly settings: AdmissionSettings;
  close(): Promise<void>;
}

export async function startLocalWebhook(env: Record<string, string>, options: { port?: number; functionKey?: string; tls?: ServingCertificate } = {}): Promise<LocalWebhook> {
  const settings = readAdmissionSettings(env);
  useAdmissionRuntime(await createAdmissionRuntime(settings));
  return { ...(await serveRuntime(options)), settings };
}

export interface LocalFleetWebhook extends Omit<LocalWebhook, "settings"> {
  readonly fleet: FleetSettings;
  readonly runtime: AdmissionRuntime;
}

/**
 * The local host serving a fleet, as `npm start` does with GMSA_CLUSTERS. `idleMs` stands in for
 * GMSA_CLUSTER_IDLE_SECONDS, whose shortest setting (a minute) is too long for a test.
 */
export async function startLocalFleetWebhook(env: Record<string, string>, options: { idleMs?: number; port?: number; tls?: ServingCertificate } = {}): Promise<LocalFleetWebhook> {
  const read = readFleetSettings(env);
  const fleet = options.idleMs === undefined ? read : { ...read, idleMs: options.idleMs };
  const logs: string[] = [];
  const runtime = await createFleetRuntime(fleet, { log: (level, message) => logs.push(`${level === "warn" ? "warning" : "information"} ${message}`) });
  useAdmissionRuntime(runtime);
  return { ...(await serveRuntime(options, logs)), fleet, runtime };
}

/** Serves whatever runtime is in use. */
async function serveRuntime(options: { port?: number; functionKey?: string; tls?: ServingCertificate }, logs: string[] = []): Promise<Omit<LocalWebhook, "settings">> {
  const tls = options.tls ?? (await generateServingCertificate(mkdtempSync(join(tmpdir(), "gmsa-host-"))));
  const server = await startLocalServer({
    host: "127.0.0.1",
    port: options.port ?? 0,
    tls,
    functionKey: options.functionKey,
    log: (level, message) => logs.push(`${level} ${message}`),
  });
  return {
    server,
    caPem: tls.caPem,
    tls,
    logs,
    close: async () => {
      await server.close();
      await stopAdmissionRuntime();
    },
  };
}
