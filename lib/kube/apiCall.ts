import { ApiException, Observable, type ConfigurationOptions, type ObservableMiddleware } from "@kubernetes/client-node";
import { ClusterUnavailableError } from "../gmsa/ports.js";
import { countRequest } from "../observability/requestCounters.js";

/**
 * Runs one Kubernetes API call bounded by the admission's signal and a per-call timeout, counts
 * it, and turns every way it can fail into an ApiOutcome: the HTTP status when the server
 * answered, or a ClusterUnavailableError when it did not.
 */
export type ApiOutcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly status: number; readonly body: unknown };

export async function callApi<T>(
  description: string,
  signal: AbortSignal,
  timeoutMs: number,
  call: (options: ConfigurationOptions) => Promise<T>,
): Promise<ApiOutcome<T>> {
  const callSignal = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
  const bound: ObservableMiddleware = {
    pre: (context) => {
      context.setSignal(callSignal);
      return new Observable(Promise.resolve(context));
    },
    post: (context) => new Observable(Promise.resolve(context)),
  };
  const options: ConfigurationOptions = { middleware: [bound], middlewareMergeStrategy: "append" };
  countRequest("apiCalls");
  try {
    return { ok: true, value: await call(options) };
  } catch (error) {
    countRequest("apiErrors");
    if (error instanceof ApiException) {
      const status = error.code;
      if (status >= 500 || status === 429) {
        throw new ClusterUnavailableError(`the Kubernetes API server answered ${status} to ${description}`, "serverError", status);
      }
      return { ok: false, status, body: error.body };
    }
    if (callSignal.aborted) {
      throw new ClusterUnavailableError(`the Kubernetes API server did not answer ${description} in time`, "timeout");
    }
    throw new ClusterUnavailableError(`the Kubernetes API server could not be reached for ${description}: ${describe(error)}`, "unreachable");
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}
