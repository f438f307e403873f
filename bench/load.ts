import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import * as t from "io-ts";
import { isLeft } from "fp-ts/Either";
import { cpuMs, rssMiB } from "./processes.js";

/**
 * One load run: autocannon (a separate process pinned to core 0) keeps `connections` kept-alive
 * HTTPS connections busy posting the same AdmissionReview for `seconds`, while the bench reads
 * the server's CPU time and resident memory from /proc.
 */
export const loadCore = "0";

const AutocannonResult = t.type({
  requests: t.type({ total: t.number, average: t.number }),
  latency: t.type({ p50: t.number, p99: t.number, max: t.number }),
  "2xx": t.number,
  non2xx: t.number,
  errors: t.number,
  duration: t.number,
});

export interface LoadResult {
  readonly answered: number;
  readonly failed: number;
  readonly perSecond: number;
  readonly cpuPerAnswerMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly peakRssMiB: number;
}

const autocannon = join(__dirname, "..", "node_modules", "autocannon", "autocannon.js");

export async function load(options: { url: string; bodyFile: string; pid: number; connections: number; seconds: number }): Promise<LoadResult> {
  const args = ["-c", loadCore, process.execPath, autocannon, "-c", String(options.connections), "-d", String(options.seconds), "-m", "POST", "-H", "content-type=application/json", "-i", options.bodyFile, "-j", "-n", options.url];
  const cpuBefore = cpuMs(options.pid);
  let peak = rssMiB(options.pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(options.pid))), 100);
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)("taskset", args, { maxBuffer: 16 * 1024 * 1024 }));
  } finally {
    clearInterval(sampler);
  }
  const cpu = cpuMs(options.pid) - cpuBefore;
  const decoded = AutocannonResult.decode(JSON.parse(stdout));
  if (isLeft(decoded)) throw new Error(`autocannon printed something unexpected: ${stdout.slice(0, 500)}`);
  const result = decoded.right;
  const answered = result["2xx"];
  return {
    answered,
    failed: result.non2xx + result.errors,
    perSecond: answered / options.seconds,
    cpuPerAnswerMs: cpu / Math.max(1, answered),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    peakRssMiB: peak,
  };
}
