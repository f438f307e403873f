import { spawn } from "node:child_process";

/**
 * Runs the uvu suites named on the command line (default: all of test/) and ends with one plain
 * summary line, "N passed, N failed, N skipped", that any CI can read.
 */
const dirs = process.argv.slice(2);
const pattern = "\\.test\\.ts$";
const runs = dirs.length > 0 ? dirs : ["test"];

async function run(dir: string): Promise<{ code: number; total: number; passed: number; skipped: number }> {
  // npm puts node_modules/.bin first on PATH: its uvu runs under the project's Node 22.
  const child = spawn("uvu", ["-r", "tsx", dir, pattern], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, FORCE_COLOR: "0" },
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    process.stdout.write(chunk);
  });
  const code = await new Promise<number>((resolve) => child.on("close", (c) => resolve(c ?? 1)));
  const count = (label: string) => Number(output.match(new RegExp(`${label}:\\s+(\\d+)`))?.[1] ?? 0);
  return { code, total: count("Total"), passed: count("Passed"), skipped: count("Skipped") };
}

void (async () => {
  let failedRuns = 0;
  const sum = { total: 0, passed: 0, skipped: 0 };
  for (const dir of runs) {
    const result = await run(dir);
    if (result.code !== 0) failedRuns++;
    sum.total += result.total;
    sum.passed += result.passed;
    sum.skipped += result.skipped;
  }
  const failed = Math.max(sum.total - sum.passed - sum.skipped, failedRuns > 0 && sum.total === sum.passed + sum.skipped ? 1 : 0);
  process.stdout.write(`\n${sum.passed} passed, ${failed} failed, ${sum.skipped} skipped\n`);
  process.exit(failedRuns > 0 || failed > 0 || sum.total === 0 ? 1 : 0);
})();
