import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import * as t from "io-ts";
import { isLeft } from "fp-ts/Either";
import { cpuMs, rssMiB } from "./processes.js";

/**
 * One load run: autocannon (bench/loadClient.js, a separate process pinned to core 0) keeps
 * `connections` kept-alive HTTPS connections busy posting the same AdmissionReview for `seconds`,
 * while the bench reads the server's CPU time and resident memory from /proc. Latencies are
 * percentiles of every answer's own time, to a microsecond, not autocannon's whole milliseconds.
 */
export const loadCore = "0";

const ClientResult = t.type({
  answered: t.number,
  failed: t.number,
  timed: t.number,
  p50Ms: t.number,
  p99Ms: t.number,
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

const client = join(__dirname, "loadClient.js");

export async function load(options: { url: string; bodyFile: string; pid: number; connections: number; seconds: number }): Promise<LoadResult> {
  const args = ["-c", loadCore, process.execPath, client, options.url, String(options.connections), String(options.seconds), options.bodyFile];
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
  const decoded = ClientResult.decode(JSON.parse(stdout));
  if (isLeft(decoded)) throw new Error(`the load client printed something unexpected: ${stdout.slice(0, 500)}`);
  const { answered, failed, timed, p50Ms, p99Ms } = decoded.right;
  if (timed !== answered) throw new Error(`the load client timed ${timed} of ${answered} answers`);
  return {
    answered,
    failed,
    perSecond: answered / options.seconds,
    cpuPerAnswerMs: cpu / Math.max(1, answered),
    p50Ms,
    p99Ms,
    peakRssMiB: peak,
  };
}
