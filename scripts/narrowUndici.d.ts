import type { Plugin } from "esbuild";

/** Resolves `undici` to the three names @kubernetes/client-node imports from it (see narrowUndici.js). */
export function narrowUndici(): Plugin;
