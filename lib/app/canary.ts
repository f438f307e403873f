import { performance } from "node:perf_hooks";
import { canaryTarget, type ReadinessHop } from "../canary/probe.js";
import type { AdmissionRuntime } from "./runtime.js";

/**
 * The canary, once: for every member the runtime serves, a server-side dry run of a GMSA pod asked
 * of the member's API server with the function's own identity (lib/canary/probe.ts), which the API
 * server sends through the wiring to the webhooks exactly as it sends a real pod. One line per
 * member says whether the whole path works and, when it does not, which hop failed. A member kept
 * out of service by its settings is reported as such, so that no member goes silent.
 */
export interface CanaryLine {
  readonly event: "gmsa.canary";
  readonly cluster: string;
  readonly outcome: ReadinessHop | "memberUnavailable" | "memberNotStarted";
  readonly summary: string;
  /** The API server's answer, for the operator (never contents or secrets: the pod names a spec nobody has). */
  readonly detail: string;
  readonly latencyMs: number;
  /** Days before the webhooks' CA bundle (the relay's certificate, when relay-wired) expires; null when not known. */
  readonly caBundleDaysLeft: number | null;
}

export async function runCanary(runtime: AdmissionRuntime, signal: AbortSignal = AbortSignal.timeout(60_000)): Promise<CanaryLine[]> {
  const probes = [...runtime.members.values()].map(async (member): Promise<CanaryLine> => {
    const started = performance.now();
    const line = (outcome: CanaryLine["outcome"], summary: string, detail = "", caBundleDaysLeft: number | null = null): CanaryLine => ({
      event: "gmsa.canary",
      cluster: member.name,
      outcome,
      summary,
      detail,
      latencyMs: Math.round(performance.now() - started),
      caBundleDaysLeft,
    });
    try {
      const ports = await member.start();
      if (!ports.probe) return line("memberNotStarted", "this member's client has no canary");
      const result = await ports.probe(canaryTarget, signal);
      return line(result.hop, result.summary, result.detail, result.caBundleDaysLeft ?? null);
    } catch (error) {
      return line("memberNotStarted", "the function could not start its client for this member", error instanceof Error ? error.message : String(error));
    }
  });
  const unavailable = [...runtime.unavailable].map(([cluster, reason]): CanaryLine => ({
    event: "gmsa.canary",
    cluster,
    outcome: "memberUnavailable",
    summary: `not served: ${reason}`,
    detail: "",
    latencyMs: 0,
    caBundleDaysLeft: null,
  }));
  return [...(await Promise.all(probes)), ...unavailable];
}
