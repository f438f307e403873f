import { startFakeApiServer, type FakeApiServer } from "./fakeApiServer.js";
import { credSpecFixture } from "./fixtures.js";

/**
 * Two members' API servers that serve the same credential spec to service accounts of `apps`:
 * `alpha` hangs every call for a minute, `beta` answers at once.
 */
export async function hungAndHealthyMembers(specName: string): Promise<{ alpha: FakeApiServer; beta: FakeApiServer }> {
  const alpha = await startFakeApiServer();
  const beta = await startFakeApiServer();
  for (const api of [alpha, beta]) {
    api.state.credSpecs = new Map([[specName, credSpecFixture(specName) as unknown as Record<string, unknown>]]);
    api.state.grants = new Set([`system:serviceaccount:apps:default|${specName}`]);
  }
  alpha.state.delayMs = 60_000;
  return { alpha, beta };
}
