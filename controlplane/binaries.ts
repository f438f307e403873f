import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { LOG_TAIL_LINES } from "./processes";

/** The control plane's binaries: built by controlplane/build.sh from the Go module proxy, cached per pinned version. */

const BUILD_SCRIPT = path.join(__dirname, "build.sh");
const BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager"] as const;

/** Runs build.sh (a no-op when the binaries are cached) and returns the bin dir. */
export async function ensureBinaries(log: (line: string) => void): Promise<string> {
  const printed = spawnSync("bash", [BUILD_SCRIPT, "--print-dir"], { encoding: "utf8" });
  const cachedDir = printed.status === 0 ? printed.stdout.trim() : "";
  if (cachedDir && BINARIES.every((b) => existsSync(path.join(cachedDir, b)))) return cachedDir;

  log(`control plane binaries missing; running ${BUILD_SCRIPT} (takes many minutes the first time)`);
  const child = spawn("bash", [BUILD_SCRIPT], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  const stderrTail: string[] = [];
  createInterface({ input: child.stderr }).on("line", (line) => {
    log(line);
    stderrTail.push(line);
    if (stderrTail.length > LOG_TAIL_LINES) stderrTail.shift();
  });
  const code = await new Promise<number | null>((resolve) => {
    child.once("error", () => resolve(-1));
    child.once("close", (c) => resolve(c));
  });
  const binDir = stdout.trim().split("\n").pop() ?? "";
  if (code !== 0 || !binDir) {
    throw new Error(`${BUILD_SCRIPT} failed (exit ${code}):\n${stderrTail.join("\n")}`);
  }
  return binDir;
}
