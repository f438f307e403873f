import { setImmediate as nextTurn } from "node:timers/promises";
import { isSpareSlotCall, type PortCall } from "../gmsa/ports.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";
import { countRequest } from "../observability/requestCounters.js";
import { ApiServerConnectionError, type ApiReply } from "./apiServerConnection.js";
import type { ApiSlots } from "./apiSlots.js";
import { EntraTokenError } from "./entraTokenError.js";

/**
 * Runs one Kubernetes API call bounded by the admission's signal and a per-call timeout, counts
 * it (and counts it as an API error when it failed: 5xx, 429, no answer, no token — not a 4xx
 * answer), and turns every way it can fail into an ApiOutcome: the HTTP status when the server
 * answered, or a ClusterUnavailableError when it did not.
 */
export type ApiOutcome =
  /** `bytes`: how long the body was, where the connection says. */
  | { readonly ok: true; readonly value: unknown; readonly bytes?: number }
  /** `tooLarge`: the body was longer than the call allowed, and was not read. */
  | { readonly ok: false; readonly status: number; readonly body: unknown; readonly tooLarge?: true };

/** One call, sent within the signal it is given (the admission's, bounded by the call's timeout). */
export type ApiSend = (signal: AbortSignal) => Promise<ApiReply>;

/** How calls to one API server are bounded, and what to do when its credentials or address go stale. */
export interface ApiCallOptions {
  readonly timeoutMs: number;
  /** The most an admission may take: a server that asks to be left alone longer than is left is not waited for. */
  readonly budgetMs?: number;
  /** Shared by every call to the same API server: how many may be in flight at once. */
  readonly slots?: ApiSlots;
  /** Called on a 401; the call is then tried once more (a token that expired or was rotated). */
  readonly onUnauthorized?: () => void;
  /** Called when the server cannot be reached, e.g. to re-read a rotated CA. */
  readonly onUnreachable?: () => void;
}

const maxAttempts = 3;
const firstRetryDelayMs = 100;

/**
 * Transient failures (a 5xx, a 429, a reset connection) are tried again, with jittered backoff
 * or the server's Retry-After, but only while the admission's signal allows: the budget, not the
 * retry count, is what bounds an admission.
 */
export async function callApi(description: string, admission: PortCall, bounds: ApiCallOptions, call: ApiSend): Promise<ApiOutcome> {
  // Refused at once when too many admissions already wait on this server; counted until it settles, retries included.
  const leave = bounds.slots?.hold(admission);
  try {
    return await callWithRetries(description, admission, bounds, call);
  } finally {
    leave?.();
  }
}

async function callWithRetries(description: string, admission: PortCall, bounds: ApiCallOptions, call: ApiSend): Promise<ApiOutcome> {
  const signal = admission.signal;
  let reauthenticated = false;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const outcome = await callOnce(description, admission, bounds, call);
      if (!outcome.ok && outcome.status === 401 && bounds.onUnauthorized && !reauthenticated) {
        reauthenticated = true;
        bounds.onUnauthorized();
        continue;
      }
      return outcome;
    } catch (error) {
      if (error instanceof ClusterUnavailableError && error.failure === "unreachable") bounds.onUnreachable?.();
      // A call that ran out its own timeout may be tried again while the admission has time left.
      const transient =
        error instanceof ClusterUnavailableError && (error.failure === "serverError" || error.failure === "unreachable" || (error.failure === "timeout" && !signal.aborted));
      if (!transient || attempt >= maxAttempts || signal.aborted) throw error;
      // The admission began no later than this call, so this is the most time it can have left.
      const left = bounds.budgetMs === undefined ? undefined : Math.max(0, bounds.budgetMs - (Date.now() - started));
      if (error.retryAfterMs !== undefined && left !== undefined && error.retryAfterMs > left) {
        // Sleeping would only turn a clear answer into a timeout, and hold up whoever shares it.
        throw new ClusterUnavailableError(
          `${error.message} and asked to wait ${Math.ceil(error.retryAfterMs / 1000)} s, longer than the admission has left (${left} ms)`,
          error.failure,
          error.httpStatus,
          error.retryAfterMs,
        );
      }
      const backoff = firstRetryDelayMs * 2 ** (attempt - 1) * (0.5 + Math.random());
      await pause(error.retryAfterMs ?? backoff, signal, error);
    }
  }
}

function pause(ms: number, signal: AbortSignal, failure: ClusterUnavailableError): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    // Waiting past the budget would only turn a clear answer into a timeout: give the last one.
    const onAbort = () => {
      clearTimeout(timer);
      reject(failure);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

async function callOnce(description: string, admission: PortCall, bounds: ApiCallOptions, call: ApiSend): Promise<ApiOutcome> {
  const release = await takeSlot(description, admission, bounds.slots);
  let outcome: ApiOutcome;
  try {
    outcome = await callInSlot(description, admission.signal, bounds.timeoutMs, call);
  } catch (error) {
    // One turn later, when the connection is back in the pool: the next call reuses it
    // instead of opening another.
    setImmediate(release);
    throw error;
  }
  // undici puts an HTTP/1.1 connection back in its pool a turn after the answer is read: a call
  // made at once (an admission's GET after its review, or the next one waiting for this slot)
  // would open a connection, and pay a TLS handshake, of its own.
  await nextTurn();
  release();
  return outcome;
}

async function takeSlot(description: string, admission: PortCall, slots: ApiSlots | undefined): Promise<() => void> {
  if (!slots) return () => {};
  try {
    return await slots.take(admission);
  } catch (error) {
    // Refused a slot it may not wait for: not a timeout to try again.
    if (isSpareSlotCall(admission) && error instanceof ClusterUnavailableError) throw error;
    throw new ClusterUnavailableError(
      `the Kubernetes API server did not answer ${description} in time: all ${slots.limit} calls this instance makes at once were taken`,
      "timeout",
    );
  }
}

async function callInSlot(description: string, signal: AbortSignal, timeoutMs: number, call: ApiSend): Promise<ApiOutcome> {
  const callSignal = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  countRequest("apiCalls", signal);
  let reply: ApiReply;
  try {
    reply = await call(callSignal);
  } catch (error) {
    // Everything here is a call that got no answer at all.
    countRequest("apiErrors", signal);
    if (error instanceof EntraTokenError) {
      throw new ClusterUnavailableError(`no Microsoft Entra token for the Kubernetes API server, for ${description}: ${error.message}`, "rejected");
    }
    if (callSignal.aborted) {
      throw new ClusterUnavailableError(`the Kubernetes API server did not answer ${description} in time`, "timeout");
    }
    throw new ClusterUnavailableError(`the Kubernetes API server could not be reached for ${description}: ${describe(error)}`, "unreachable");
  }
  const status = reply.status;
  if (status >= 500 || status === 429) {
    countRequest("apiErrors", signal);
    throw new ClusterUnavailableError(`the Kubernetes API server answered ${status} to ${description}`, "serverError", status, reply.retryAfterMs);
  }
  // A 4xx is an answer the policy acts on (a spec that does not exist, a review refused),
  // not a failure of the API server: counting it would overstate API errors.
  if (reply.tooLarge) return { ok: false, status, body: undefined, tooLarge: true };
  if (status >= 300) return { ok: false, status, body: reply.body };
  return { ok: true, value: reply.body, ...(reply.bytes === undefined ? {} : { bytes: reply.bytes }) };
}

function describe(error: unknown): string {
  if (error instanceof ApiServerConnectionError) return error.detail;
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}
