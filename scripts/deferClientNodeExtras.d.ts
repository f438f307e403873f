import type { Plugin } from "esbuild";

/** Stand-ins that load client-node's proxy, JSONPath and child_process imports on first use (see deferClientNodeExtras.js). */
export function deferClientNodeExtras(): Plugin;

/** The modules client-node gets stand-ins for. */
export const deferredModules: readonly string[];
