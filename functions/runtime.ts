import { performance } from "node:perf_hooks";
import { clusterPorts, type ClusterPorts } from "../lib/kube/clusterClient.js";
import { readAdmissionSettings, type AdmissionSettings } from "../lib/settings.js";

/**
 * What one instance of the app keeps between requests: its settings and its cluster clients.
 * Built once, at start-up in the Functions host (so bad settings stop it there) or by the local
 * host, which may hand in its own.
 */
export interface AdmissionRuntime {
  readonly settings: AdmissionSettings;
  readonly cluster: ClusterPorts;
  readonly startedAt: number;
}

let current: AdmissionRuntime | undefined;
let served = 0;

export function createAdmissionRuntime(settings: AdmissionSettings, cluster: ClusterPorts = clusterPorts(settings)): AdmissionRuntime {
  return { settings, cluster, startedAt: performance.now() };
}

export function admissionRuntime(): AdmissionRuntime {
  current ??= createAdmissionRuntime(readAdmissionSettings());
  return current;
}

/** Hands this instance a runtime; the one it replaces stops watching its cluster. */
export function useAdmissionRuntime(runtime: AdmissionRuntime): void {
  const previous = current;
  current = runtime;
  served = 0;
  if (previous && previous !== runtime) void previous.cluster.stop();
}

export async function stopAdmissionRuntime(): Promise<void> {
  const previous = current;
  current = undefined;
  await previous?.cluster.stop();
}

/** True for the first admission an instance serves: a cold start the API server waited for. */
export function takeColdStart(): boolean {
  return served++ === 0;
}
