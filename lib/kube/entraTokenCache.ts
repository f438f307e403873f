import type { AccessToken, TokenCredential } from "@azure/core-auth";
import { isRefreshable } from "./refreshableCredential.js";
import { settleWithin } from "./settleWithin.js";
import { EntraTokenError } from "./entraTokenError.js";

/**
 * One Microsoft Entra access token for one scope, kept for the whole instance. Requests are
 * served from the cache; a token is renewed in the background once it is due for refresh (the
 * credential's `refreshAfterTimestamp`, else a margin before expiry) and only waited for when
 * none is usable. Every caller that needs a token while one is being fetched shares that one
 * fetch, so a burst of admissions costs one call to the identity endpoint.
 */
export interface EntraTokenCache {
  /** A bearer token for the scope. Throws EntraTokenError when none can be had. */
  token(): Promise<string>;
  /**
   * Forgets the cached token (the API server refused it): the next request fetches a new one,
   * past the credential's own cache when the credential can do that (RefreshableCredential).
   */
  invalidate(): void;
  status(): EntraTokenStatus;
}

export interface EntraTokenStatus {
  readonly cached: boolean;
  readonly expiresOnTimestamp?: number;
  readonly refreshAtTimestamp?: number;
  /** How many times the credential has been asked, successfully or not. */
  readonly fetches: number;
  /** How many of those asked past the credential's cache. */
  readonly freshFetches: number;
}

export interface EntraTokenCacheOptions {
  /** What the token is for, in error messages ("the AKS API server"). */
  readonly purpose: string;
  readonly now?: () => number;
  /** How long before expiry a token is renewed when the credential says nothing. Default 5 min. */
  readonly refreshMarginMs?: number;
  /**
   * The longest one call to the credential may take, enforced here whether or not the
   * credential heeds its abort signal. Past it the call is abandoned and the next need starts
   * another. Default 10 s.
   */
  readonly fetchTimeoutMs?: number;
  /** After a failed background renewal, how long to go on with the current token before trying again. Default 10 s. */
  readonly retryAfterFailureMs?: number;
  readonly log?: (level: "info" | "warn", message: string) => void;
}

export { EntraTokenError };

/** Tokens are not used in their last moments: a request may take a while to reach the server. */
const maxExpirySkewMs = 30_000;

interface HeldToken {
  readonly token: string;
  readonly expiresOn: number;
  readonly refreshAt: number;
  readonly usableUntil: number;
}

export function entraTokenCache(credential: TokenCredential, scope: string, options: EntraTokenCacheOptions): EntraTokenCache {
  const now = options.now ?? Date.now;
  const refreshMarginMs = options.refreshMarginMs ?? 5 * 60_000;
  const fetchTimeoutMs = options.fetchTimeoutMs ?? 10_000;
  const retryAfterFailureMs = options.retryAfterFailureMs ?? 10_000;
  const log = options.log ?? ((level, message) => (level === "warn" ? console.warn(message) : console.info(message)));
  let held: HeldToken | undefined;
  let inFlight: Promise<HeldToken> | undefined;
  // Whether inFlight goes past the credential's cache, started after the last invalidate().
  let inFlightIsFresh = false;
  // Bumped by invalidate(): a fetch that started before it may bring back the refused token.
  let generation = 0;
  let noBackgroundRefreshBefore = 0;
  let fetches = 0;
  let freshFetches = 0;
  // Set by invalidate(): the credential's cache holds the refused token, so go past it.
  let needFresh = false;

  function schedule(access: AccessToken, requestedAt: number): HeldToken {
    const expiresOn = access.expiresOnTimestamp;
    const lifetime = Math.max(0, expiresOn - requestedAt);
    const usableUntil = expiresOn - Math.min(maxExpirySkewMs, lifetime / 4);
    const suggested = access.refreshAfterTimestamp;
    const refreshAt = suggested !== undefined && Number.isFinite(suggested) ? suggested : expiresOn - Math.min(refreshMarginMs, lifetime / 2);
    return { token: access.token, expiresOn, usableUntil, refreshAt: Math.min(refreshAt, usableUntil) };
  }

  function ask(fresh: boolean, signal: AbortSignal): Promise<AccessToken | null> {
    if (fresh && isRefreshable(credential)) {
      freshFetches += 1;
      return credential.getFreshToken(scope, { abortSignal: signal });
    }
    return credential.getToken(scope, { abortSignal: signal });
  }

  function fetchToken(): Promise<HeldToken> {
    const startedIn = generation;
    const fresh = needFresh;
    needFresh = false;
    const attempt = (async () => {
      fetches += 1;
      const requestedAt = now();
      let access: AccessToken | null;
      try {
        access = await settleWithin(
          fetchTimeoutMs,
          (signal) => ask(fresh, signal),
          () => new Error(`the credential did not answer within ${fetchTimeoutMs} ms`),
        );
      } catch (error) {
        // The refused token may still be in the credential's cache: the next try goes past it too.
        if (fresh && generation === startedIn) needFresh = true;
        throw new EntraTokenError(`could not get a Microsoft Entra token for ${options.purpose} (scope ${scope}): ${firstLine(error)}`, { cause: error });
      }
      if (!access || typeof access.token !== "string" || access.token === "" || !Number.isFinite(access.expiresOnTimestamp)) {
        if (fresh && generation === startedIn) needFresh = true;
        throw new EntraTokenError(`the credential gave no usable Microsoft Entra token for ${options.purpose} (scope ${scope})`);
      }
      const fetched = schedule(access, requestedAt);
      if (generation === startedIn) held = fetched;
      return fetched;
    })();
    inFlight = attempt;
    inFlightIsFresh = fresh;
    // Whatever the credential does, the attempt settles within fetchTimeoutMs, and with it this
    // entry: a hung call is never shared beyond that, and the next need starts a new one.
    const settle = () => {
      if (inFlight === attempt) inFlight = undefined;
    };
    attempt.then(settle, settle);
    return attempt;
  }

  function refreshInBackground(): void {
    fetchToken().then(
      () => undefined,
      (error: unknown) => {
        noBackgroundRefreshBefore = now() + retryAfterFailureMs;
        log("warn", `${firstLine(error)}; going on with the current token until it expires`);
      },
    );
  }

  return {
    async token() {
      const at = now();
      const current = held;
      if (current && at < current.usableUntil) {
        if (at >= current.refreshAt && !inFlight && at >= noBackgroundRefreshBefore) refreshInBackground();
        return current.token;
      }
      return (await (inFlight ?? fetchToken())).token;
    },
    invalidate() {
      // A burst of admissions refused with the same token asks once, not once each: a fetch
      // past the cache that started after the token was refused already brings a new one.
      if (inFlight && inFlightIsFresh) return;
      held = undefined;
      inFlight = undefined;
      generation += 1;
      noBackgroundRefreshBefore = 0;
      needFresh = true;
    },
    status() {
      return held ? { cached: true, expiresOnTimestamp: held.expiresOn, refreshAtTimestamp: held.refreshAt, fetches, freshFetches } : { cached: false, fetches, freshFetches };
    },
  };
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const line = text.split("\n", 1)[0]!.trim();
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}
