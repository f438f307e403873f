import type { Plugin } from "esbuild";

/** Resolves `undici` to the few names the bundles import from it (see narrowUndici.js). */
export function narrowUndici(): Plugin;
