import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let gc: (() => void) | undefined;

/**
 * What each value `keep` makes of one text retains of V8's heap, on average, measured across a
 * full collection before and after: the texts are made before (flat, as a body read from the
 * network is), and only what `keep` returns is held when the second is taken.
 */
export function heapHeldEach<T>(texts: readonly string[], keep: (text: string) => T): { readonly held: number; readonly kept: readonly T[] } {
  if (!gc) {
    // A full collection on demand, without starting the test process with --expose-gc; the
    // function is taken once, since a context made while measuring would be measured.
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = texts.map(keep);
  gc();
  return { held: (process.memoryUsage().heapUsed - before) / kept.length, kept };
}
