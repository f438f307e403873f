import { maxBodyBytes } from "../lib/admission/httpExchange.js";

/**
 * The relay's limits, sized together: whatever any client sends, nginx plus what it spills to
 * its memory-backed temp directory stays under the container's memory limit. Anything that can
 * reach the relay can open connections and send bodies, so every resource a connection can take
 * has a ceiling here, and the sum of the ceilings is checked against the limit (a unit test) and
 * measured through a real nginx (the relay end-to-end test).
 */
export const relayLimits = {
  /** One worker: the relay's CPU limit is half a core, and one worker keeps the arithmetic simple. */
  workerProcesses: 1,
  /** Every connection of the worker, from clients and to the function alike. */
  workerConnections: 256,
  /** Requests past their headers at once (limit_conn): each may hold a body buffer and a function connection. */
  requestsInFlight: 64,
  /**
   * The same per client address. On AKS the API server's calls come through a few konnectivity
   * agents, so one address must be able to carry a burst of admissions; half the total leaves
   * the other half to the other agents.
   */
  requestsInFlightPerClient: 32,
  /** The function's own limit: a larger review would get 413 from the function anyway. */
  maxBodyBytes,
  /**
   * Kept in memory per request; a larger body (a pod of several hundred kilobytes) is written to
   * the temp directory instead. An AdmissionReview of an ordinary pod is a few kilobytes.
   */
  bodyBufferBytes: 64 * 1024,
  headerBufferBytes: 1024,
  largeHeaderBuffers: { count: 4, bytes: 8 * 1024 },
  /** The memory-backed emptyDir bodies spill to: a full one fails that request (ENOSPC), nothing else. */
  tempSizeLimitMiB: 32,
  /** Idle connections kept to the function (each a TLS session saved per admission). */
  functionKeepalive: 16,
  /**
   * The whole of a request's headers, the TLS handshake included: nginx counts it from the
   * connection's first byte, so it bounds how long a client may take to start a request.
   */
  clientHeaderTimeoutSeconds: 3,
  /**
   * The longest silence while a body arrives. Not a bound on the whole body (stock nginx has
   * none): a request counts towards requestsInFlight from its headers on, so a client that
   * trickles its body holds a slot for as long as it keeps each gap shorter than this. The API
   * server writes a review in one go, so one second of silence in the middle of a body means the
   * client is not sending one; the shorter the gap allowed, the more a trickle costs its sender.
   */
  clientBodyTimeoutSeconds: 1,
  sendTimeoutSeconds: 5,
  /** An idle client connection is closed after this; the API server opens another when it needs one. */
  clientKeepaliveTimeoutSeconds: 30,
  clientKeepaliveRequests: 1000,
  functionKeepaliveTimeoutSeconds: 30,
  memoryRequestMiB: 64,
  memoryLimitMiB: 128,
} as const;

/**
 * What nginx itself was measured to need (nginx 1.22 on Debian, OpenSSL 3, the relay's config):
 * its processes' RSS at rest, and what each connection and each request in flight adds at most.
 * Rounded up; the end-to-end test measures again and fails if the real figures exceed the budget.
 */
export const nginxMeasuredCost = {
  /** Measured 16 MiB for master and worker together (their shared pages counted twice). */
  baselineMiB: 20,
  /** A TLS client connection with its header buffers full: measured about 60 KiB. */
  perConnectionKiB: 96,
  /** A request in flight: its body buffer, the function connection's TLS state and buffers. */
  perRequestKiB: 160,
} as const;

export interface MemoryBudgetLine {
  readonly what: string;
  readonly mib: number;
}

/** The worst case, term by term: what the container's memory limit must cover. */
export function relayMemoryBudget(): { readonly lines: readonly MemoryBudgetLine[]; readonly totalMiB: number; readonly nginxMiB: number } {
  const l = relayLimits;
  const c = nginxMeasuredCost;
  const lines: MemoryBudgetLine[] = [
    { what: "nginx at rest (master, worker, CA bundle, shared zones)", mib: c.baselineMiB },
    { what: `${l.workerConnections} connections × ${c.perConnectionKiB} KiB (TLS state, header buffers)`, mib: (l.workerConnections * c.perConnectionKiB) / 1024 },
    {
      what: `${l.requestsInFlight} requests in flight × (${l.bodyBufferBytes / 1024} KiB body buffer + ${c.perRequestKiB - l.bodyBufferBytes / 1024} KiB function connection)`,
      mib: (l.requestsInFlight * c.perRequestKiB) / 1024,
    },
    { what: "bodies spilled to the memory-backed temp directory (its sizeLimit)", mib: l.tempSizeLimitMiB },
  ];
  const totalMiB = lines.reduce((sum, line) => sum + line.mib, 0);
  return { lines, totalMiB, nginxMiB: totalMiB - l.tempSizeLimitMiB };
}
