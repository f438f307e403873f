import { createAdmissionRuntime, stopAdmissionRuntime, useAdmissionRuntime } from "../../functions/runtime.js";
import { startLocalServer, type LocalServer } from "../../host/localServer.js";
import { generateServingCertificate, type ServingCertificate } from "../../host/servingCertificate.js";
import { readAdmissionSettings, type AdmissionSettings } from "../../lib/settings.js";
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
  const tls = options.tls ?? (await generateServingCertificate(mkdtempSync(join(tmpdir(), "gmsa-host-"))));
  const logs: string[] = [];
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
    settings,
    close: async () => {
      await server.close();
      await stopAdmissionRuntime();
    },
  };
}
