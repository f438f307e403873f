import { createHash } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { isLoopbackHttp } from "./plainHttp.js";

/**
 * @kubernetes/client-node 2.x builds a new connection pool (an undici dispatcher) for every
 * request from the kubeconfig's TLS options, so every API call opens a new connection and pays
 * a full TLS handshake. This hands out one keep-alive pool per TLS identity instead: every call
 * made through the KubeConfig (API clients, the informer's list, the watch) reuses its
 * connections. Authentication is untouched: headers and tokens are still applied per request
 * by the KubeConfig, so rotating tokens keep working; only the connection pool is shared.
 */
export interface SharedConnections {
  /** Closes the pools: call once nothing uses the KubeConfig any more. */
  close(): Promise<void>;
}

const hookName = "createDispatcher";

export function shareConnections(config: KubeConfig): SharedConnections {
  // The hook is private in client-node's typings, so it is reached by name. Should a release
  // drop it, fail at start-up rather than silently fall back to a handshake per call.
  const original: unknown = Reflect.get(config, hookName);
  if (typeof original !== "function") {
    throw new Error("@kubernetes/client-node no longer builds its connection pools where expected: connections to the API server cannot be shared");
  }
  const pools = new Map<string, unknown>();

  const shared = (cluster: Parameters<KubeConfig["createDispatcherOptions"]>[0], tls: Parameters<KubeConfig["createDispatcherOptions"]>[1]): unknown => {
    // Plain HTTP is allowed to a proxy on this machine only (kubectl proxy); the global pool
    // serves it and already keeps connections alive.
    if (cluster && isLoopbackHttp(cluster.server)) return undefined;
    const options = config.createDispatcherOptions(cluster, tls);
    if (options.type === "none") return undefined;
    // Keyed by the TLS material itself, not by names: a rotated CA or client certificate gets a
    // new pool, and the old one is left to close its idle connections.
    const key = createHash("sha256").update(JSON.stringify(options)).digest("hex");
    const known = pools.get(key);
    if (known !== undefined) return known;
    const made: unknown = Reflect.apply(original, config, [cluster, tls]);
    pools.clear();
    pools.set(key, made);
    return made;
  };
  Reflect.set(config, hookName, shared);

  return {
    async close() {
      const closing = [...pools.values()];
      pools.clear();
      await Promise.all(closing.map((pool) => destroy(pool)));
    },
  };
}

async function destroy(pool: unknown): Promise<void> {
  if (typeof pool !== "object" || pool === null || !("destroy" in pool) || typeof pool.destroy !== "function") return;
  await Promise.resolve(Reflect.apply(pool.destroy, pool, [])).catch(() => {});
}
