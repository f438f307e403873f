/**
 * The cluster could not give an answer in time, or at all. Admission fails closed on it: the
 * pod is refused with a 5xx that says so, never admitted unchecked.
 */
export class ClusterUnavailableError extends Error {
  constructor(
    message: string,
    /** backedUp: every call to the API server is taken and too many admissions already wait for one. */
    readonly failure: "timeout" | "unreachable" | "serverError" | "rejected" | "backedUp",
    readonly httpStatus?: number,
    /** How long the server asked us to wait before trying again (429/503 Retry-After). */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "ClusterUnavailableError";
  }
}
