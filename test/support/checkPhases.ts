import * as assert from "uvu/assert";

/**
 * Helpers for tests of work handed from one turn of the event loop to the next (the local host's
 * turn queue and reply batch).
 */

/** Settles once the immediates already scheduled have run: the end of the coming check phase. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Calls `then` after `hops` reactions on settled promises, as a warm admission's chain of awaits does. */
export function afterAwaits(then: () => void, hops = 50): void {
  void (async () => {
    for (let i = 0; i < hops; i++) await null;
    then();
  })();
}

/** Logs "next check phase" from the check phase after the one the caller runs in. */
export function markNextCheckPhase(log: string[]): void {
  setImmediate(() => log.push("next check phase"));
}

/**
 * Reports a queue should never make. The queues swallow what their reporter throws, so a report is
 * collected and checked after each test instead of failing inside the reporter.
 */
export function unexpectedReports(): { readonly report: (error: unknown) => void; assertNone(): void } {
  const reported: unknown[] = [];
  return {
    report: (error) => reported.push(error),
    assertNone() {
      assert.equal(reported.splice(0).map(String), [], "nothing was reported");
    },
  };
}
