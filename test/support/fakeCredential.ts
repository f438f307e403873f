import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/core-auth";
import type { RefreshableCredential } from "../../lib/kube/refreshableCredential.js";

/**
 * A TokenCredential that hands out tokens from a script, one per call (the last one again once
 * the script runs out), and records every call. A step may also fail or wait to be released.
 */
export type TokenStep =
  | { readonly token: string; readonly lifetimeMs: number; readonly refreshAfterMs?: number }
  | { readonly fail: string }
  | { readonly empty: true }
  /** Never answers, and ignores the abort signal, as a credential whose endpoint hangs. */
  | { readonly hang: true };

export interface TokenCall {
  readonly scopes: string | string[];
  readonly at: number;
  /** Asked past the credential's cache (getFreshToken). */
  readonly fresh?: boolean;
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
      if ("hang" in step) return new Promise<never>(() => undefined);
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

/**
 * A credential that caches as MSAL does for managed identities: getToken hands out the token it
 * already has until that expires, whatever the API server thought of it; only getFreshToken
 * (or having no usable token) takes the next step of the script.
 */
export function cachingCredential(script: TokenStep[], now: () => number = Date.now): FakeCredential & RefreshableCredential {
  const inner = fakeCredential(script, now);
  const cache = new Map<string, AccessToken>();
  const key = (scopes: string | string[]) => (Array.isArray(scopes) ? scopes.join(" ") : scopes);
  const fetch = async (scopes: string | string[], options: GetTokenOptions | undefined, fresh: boolean) => {
    const before = inner.calls.length;
    // The inner fake records the call as soon as it is made; mark it before it settles.
    const pending = inner.getToken(scopes, options);
    const call = inner.calls[before];
    if (call) inner.calls[before] = { ...call, fresh };
    const access = await pending;
    if (access) cache.set(key(scopes), access);
    return access;
  };
  return {
    calls: inner.calls,
    scripts: inner.scripts,
    hold: () => inner.hold(),
    release: () => inner.release(),
    async getToken(scopes, options) {
      const cached = cache.get(key(scopes));
      if (cached && cached.expiresOnTimestamp > now()) return cached;
      return fetch(scopes, options, false);
    },
    getFreshToken: (scope, options) => fetch(scope, options, true),
  };
}

/** A clock the test moves by hand. */
export function manualClock(start = 1_700_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let time = start;
  return { now: () => time, advance: (ms) => void (time += ms) };
}
