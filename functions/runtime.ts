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

let current: Promise<AdmissionRuntime> | undefined;
let served = 0;

export async function createAdmissionRuntime(settings: AdmissionSettings, cluster?: ClusterPorts): Promise<AdmissionRuntime> {
  return { settings, cluster: cluster ?? (await clusterPorts(settings)), startedAt: performance.now() };
}

/**
 * This instance's runtime, built on first use from the environment. A failure is not kept: the
 * next call tries again (the Functions host reports the first one at start).
 */
export function admissionRuntime(): Promise<AdmissionRuntime> {
  if (!current) {
    const building = Promise.resolve()
      .then(() => createAdmissionRuntime(readAdmissionSettings()))
      .catch((error: unknown) => {
        if (current === building) current = undefined;
        throw error;
      });
    current = building;
  }
  return current;
}

/** Hands this instance a runtime; the one it replaces stops watching its cluster. */
export function useAdmissionRuntime(runtime: AdmissionRuntime): void {
  const previous = current;
  current = Promise.resolve(runtime);
  served = 0;
  void previous?.then((old) => (old !== runtime ? old.cluster.stop() : undefined)).catch(() => {});
}

export async function stopAdmissionRuntime(): Promise<void> {
  const previous = current;
  current = undefined;
  await (await previous?.catch(() => undefined))?.cluster.stop();
}

/** True for the first admission an instance serves: a cold start the API server waited for. */
export function takeColdStart(): boolean {
  return served++ === 0;
}
