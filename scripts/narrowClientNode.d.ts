import type { Plugin } from "esbuild";

/** client-node without the parts the bundle does not use, its serializer with the models in `keep` and what they hold (see narrowClientNode.js). */
export function narrowClientNode(options?: { keep: ReadonlySet<string>; report?: (kept: readonly string[], total: number) => void }): Plugin;

/** The serializer's model names that `bundle` holds as words. */
export function modelNamesIn(bundle: string, models: readonly string[]): Set<string>;

/** Every model name the installed client-node's serializer knows. */
export function allModels(resolveFrom: string): string[];
