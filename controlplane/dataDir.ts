import { readdirSync, readFileSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** Where a control plane keeps its certificates, logs, etcd data and kubeconfig: a temp dir of its own by default. */

export const TEMP_PREFIX = "gmsa-controlplane-";
export const OWNER_FILE = "owner.pid";

/** Removes temp data dirs left behind by processes that died without cleaning up (e.g. SIGKILL). */
export function removeStaleTempDirs(): void {
  let entries: string[];
  try {
    entries = readdirSync(os.tmpdir()).filter((e) => e.startsWith(TEMP_PREFIX));
  } catch {
    return;
  }
  for (const entry of entries) {
    const dir = path.join(os.tmpdir(), entry);
    try {
      const owner = Number(readFileSync(path.join(dir, OWNER_FILE), "utf8").trim());
      if (!Number.isInteger(owner) || owner <= 0 || pidAlive(owner)) continue;
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // no owner file (being created, or not ours): leave it
    }
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
