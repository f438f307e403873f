/**
 * The oldest Node.js release the app runs on, from the `>=` bound of package.json's `engines`
 * range. The bundled undici (client-node's HTTP client, and the fetch classes the Functions
 * library builds every invocation from) calls Node APIs that older releases of Node 22 lack:
 * on one of them every invocation, health included, would fail inside a library with a message
 * that names neither the app nor the release.
 */
export function nodeReleaseFloor(enginesRange: string): readonly [number, number, number] {
  const floor = /^>=\s*(\d+)\.(\d+)(?:\.(\d+))?(?:\s|$)/.exec(enginesRange.trim());
  if (!floor) throw new Error(`package.json engines.node must start with a >= bound, not ${JSON.stringify(enginesRange)}`);
  return [Number(floor[1]), Number(floor[2]), Number(floor[3] ?? 0)];
}

/** Why this Node.js release cannot run the app, or undefined when it can. */
export function nodeReleaseProblem(version: string, enginesRange: string): string | undefined {
  const floor = nodeReleaseFloor(enginesRange);
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!parts) return `Node.js ${version} is not a release this app can read; it needs ${floor.join(".")} or later`;
  const running = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  for (let i = 0; i < 3; i++) {
    if (running[i]! > floor[i]!) return undefined;
    if (running[i]! < floor[i]!) return `gmsa-admission needs Node.js ${floor.join(".")} or later (engines ${enginesRange}); this is ${version}`;
  }
  return undefined;
}
