import type { Plugin } from "esbuild";

/** Narrows client-node's ObjectSerializer to the models in `keep` and what they hold (see narrowModels.js). */
export function narrowModels(options: { keep: ReadonlySet<string>; report?: (kept: readonly string[], total: number) => void }): Plugin;

/** The serializer's model names that `bundle` holds as words. */
export function modelNamesIn(bundle: string, models: readonly string[]): Set<string>;

/** Every model name the installed client-node's serializer knows. */
export function allModels(resolveFrom: string): string[];
