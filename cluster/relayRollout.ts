import type { KubeConfig } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { withKubeObjects } from "./kubeObjects.js";

/**
 * Waits until a Deployment runs only pods of its current template: the controller has seen the
 * latest generation, every replica is updated and available, and no old one is left. Until then
 * an old pod may still answer the API server.
 */
const DeploymentProgress = t.type({
  metadata: t.partial({ generation: t.number }),
  spec: t.partial({ replicas: t.number }),
  status: t.union([
    t.undefined,
    t.partial({
      observedGeneration: t.number,
      replicas: t.number,
      updatedReplicas: t.number,
      availableReplicas: t.number,
      conditions: t.array(t.partial({ type: t.string, status: t.string, reason: t.string })),
    }),
  ]),
});
type DeploymentProgress = t.TypeOf<typeof DeploymentProgress>;

export type RolloutState = { readonly done: true } | { readonly done: false; readonly waitingFor: string; readonly stuck?: boolean };

export function rolloutState(deployment: DeploymentProgress): RolloutState {
  const wanted = deployment.spec.replicas ?? 1;
  const status = deployment.status ?? {};
  const generation = deployment.metadata.generation ?? 0;
  if ((status.observedGeneration ?? 0) < generation) return { done: false, waitingFor: `the controller to see generation ${generation}` };
  const stuck = (status.conditions ?? []).some((c) => c.type === "Progressing" && c.status === "False" && c.reason === "ProgressDeadlineExceeded");
  const updated = status.updatedReplicas ?? 0;
  const available = status.availableReplicas ?? 0;
  const total = status.replicas ?? 0;
  if (updated < wanted) return { done: false, waitingFor: `${updated} of ${wanted} replicas updated`, stuck };
  if (total > updated) return { done: false, waitingFor: `${total - updated} old replicas to go`, stuck };
  if (available < wanted) return { done: false, waitingFor: `${available} of ${wanted} replicas available`, stuck };
  return { done: true };
}

export class RolloutTimeoutError extends Error {
  constructor(
    readonly deployment: string,
    readonly waitingFor: string,
    why: string,
  ) {
    super(`deployment ${deployment}: ${why} (${waitingFor})`);
    this.name = "RolloutTimeoutError";
  }
}

export interface RolloutWait {
  readonly timeoutMs: number;
  readonly pollMs?: number;
  readonly now?: () => number;
}

export async function waitForRollout(config: KubeConfig, namespace: string, name: string, wait: RolloutWait): Promise<void> {
  const now = wait.now ?? Date.now;
  const deadline = now() + wait.timeoutMs;
  const ref = `${namespace}/${name}`;
  await withKubeObjects(config, async (client) => {
    for (;;) {
      const live = await client.read({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name, namespace } });
      if (live === undefined) throw new Error(`deployment ${ref}: not found`);
      const decoded = DeploymentProgress.decode(live);
      if (isLeft(decoded)) throw new Error(`deployment ${ref}: the API server answered something that is not a Deployment`);
      const state = rolloutState(decoded.right);
      if (state.done) return;
      if (state.stuck) throw new RolloutTimeoutError(ref, state.waitingFor, "the rollout exceeded its progress deadline");
      if (now() >= deadline) throw new RolloutTimeoutError(ref, state.waitingFor, `the rollout did not finish within ${Math.round(wait.timeoutMs / 1000)} s`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(wait.pollMs ?? 1000, Math.max(deadline - now(), 0) + 10)));
    }
  });
}
