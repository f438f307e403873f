import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/core-auth";

/**
 * A TokenCredential that hands out tokens from a script, one per call (the last one again once
 * the script runs out), and records every call. A step may also fail or wait to be released.
 */
export type TokenStep =
  | { readonly token: string; readonly lifetimeMs: number; readonly refreshAfterMs?: number }
  | { readonly fail: string }
  | { readonly empty: true };

export interface TokenCall {
  readonly scopes: string | string[];
  readonly at: number;
}

export interface FakeCredential extends TokenCredential {
  readonly calls: TokenCall[];
  /** Steps still to hand out, by scope; a scope without its own script uses `default`. */
  readonly scripts: Map<string, TokenStep[]>;
  /** While set, getToken waits for release() before answering. */
  hold(): void;
  release(): void;
}

export function fakeCredential(script: TokenStep[], now: () => number = Date.now): FakeCredential {
  const calls: TokenCall[] = [];
  const scripts = new Map<string, TokenStep[]>([["default", [...script]]]);
  let held: { promise: Promise<void>; release: () => void } | undefined;
  return {
    calls,
    scripts,
    hold() {
      let release = () => undefined as void;
      const promise = new Promise<void>((resolve) => (release = resolve));
      held = { promise, release };
    },
    release() {
      const current = held;
      held = undefined;
      current?.release();
    },
    async getToken(scopes: string | string[], _options?: GetTokenOptions): Promise<AccessToken | null> {
      const at = now();
      calls.push({ scopes, at });
      const scope = Array.isArray(scopes) ? (scopes[0] ?? "") : scopes;
      const steps = scripts.get(scope) ?? scripts.get("default")!;
      const step = steps.length > 1 ? steps.shift()! : steps[0];
      if (held) await held.promise;
      if (!step) throw new Error("the fake credential has no script");
      if ("fail" in step) throw new Error(step.fail);
      if ("empty" in step) return null;
      return {
        token: step.token,
        expiresOnTimestamp: at + step.lifetimeMs,
        ...(step.refreshAfterMs !== undefined ? { refreshAfterTimestamp: at + step.refreshAfterMs } : {}),
        tokenType: "Bearer",
      };
    },
  };
}

/** A clock the test moves by hand. */
export function manualClock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let time = start;
  return { now: () => time, advance: (ms) => void (time += ms) };
}
