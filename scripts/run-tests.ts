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
  let lingering: NodeJS.Timeout | undefined;
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    process.stdout.write(chunk);
    // Every suite has reported: a run that does not exit now is held open by something a test
    // left behind. Say so and fail, rather than hang until CI gives up.
    if (!lingering && /Duration:/.test(output)) {
      lingering = setTimeout(() => {
        process.stderr.write(`${dir}: the tests finished but the run did not exit within 60 s (a server or process left open); stopping it\n`);
        child.kill("SIGKILL");
      }, 60_000);
    }
  });
  const code = await new Promise<number>((resolve) => child.on("close", (c, signal) => resolve(signal ? 1 : (c ?? 1))));
  clearTimeout(lingering);
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
