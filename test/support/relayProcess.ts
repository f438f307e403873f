import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RelayCertificate } from "../../cluster/relay.js";
import { memberPathPrefix, type FleetMember } from "../../cluster/fleetMember.js";
import { clusterSecretInclude, functionKeyInclude, relayNginxConf, type FunctionEndpoint } from "../../cluster/relayNginxConf.js";

/**
 * The relay's nginx.conf, rendered by the same function as the ConfigMap's, run by a real nginx
 * (Debian's package: the software of the relay's image) on loopback. Only where it listens and
 * where its files are differ from the cluster.
 */
export interface RelayProcess {
  readonly url: string;
  readonly port: number;
  readonly conf: string;
  /** Whether this nginx follows the function's address while running (`resolve`, nginx 1.27.3+). */
  readonly reResolve: boolean;
  /** One line per request the relay handled. */
  accessLog(): string[];
  /** Resident memory of nginx's processes (master and workers), from /proc, in bytes. */
  residentBytes(): number;
  close(): Promise<void>;
}

export interface RelayProcessOptions {
  readonly function: FunctionEndpoint;
  readonly functionKey: string;
  /** The relay's own serving certificate. */
  readonly certificate: RelayCertificate;
  /** CAs the relay trusts for the function (the cluster uses the system bundle). */
  readonly trustedCaPem: string;
  readonly resolver: string;
  readonly timeoutSeconds: number;
  /** A fleet member's relay: its paths on the function and its secret header. */
  readonly cluster?: FleetMember;
}

const repoRoot = join(__dirname, "..", "..");

/** nginx from PATH or /usr/sbin; installs Debian's package through the project's script if missing. */
export function nginxBinary(): string {
  const find = () => [...(process.env.PATH ?? "").split(":").map((dir) => join(dir, "nginx")), "/usr/sbin/nginx"].find((path) => existsSync(path));
  let found = find();
  if (found === undefined) {
    const install = spawnSync("bash", [join(repoRoot, "scripts", "install-test-deps.sh")], { encoding: "utf8" });
    if (install.status !== 0) throw new Error(`nginx is missing and scripts/install-test-deps.sh failed:\n${install.stdout}${install.stderr}`);
    found = find();
  }
  if (found === undefined) throw new Error("nginx is missing: run scripts/install-test-deps.sh");
  return found;
}

/** nginx's version, from `nginx -v` ("nginx version: nginx/1.22.1"). */
export function nginxVersion(binary = nginxBinary()): readonly [number, number, number] {
  const run = spawnSync(binary, ["-v"], { encoding: "utf8" });
  const match = /nginx\/(\d+)\.(\d+)\.(\d+)/.exec(`${run.stdout}${run.stderr}`);
  if (!match) throw new Error(`cannot read nginx's version: ${run.stderr}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** `resolve` on an upstream server came to open-source nginx in 1.27.3. */
export function nginxFollowsDns(binary = nginxBinary()): boolean {
  const [major, minor, patch] = nginxVersion(binary);
  return major > 1 || (major === 1 && (minor > 27 || (minor === 27 && patch >= 3)));
}

/** A process and its descendants, from /proc. */
function processTree(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
  return [pid, ...children.flatMap(processTree)];
}

function residentBytesOf(pid: number): number {
  try {
    const rss = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return rss ? Number(rss[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function healthy(port: number, caPem: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/healthz", ca: caPem, servername: "localhost", checkServerIdentity: () => undefined, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

export async function startRelayProcess(options: RelayProcessOptions): Promise<RelayProcess> {
  const binary = nginxBinary();
  // Readable by the unprivileged workers nginx switches to when it starts as root.
  const dir = mkdtempSync(join(tmpdir(), "gmsa-relay-"));
  chmodSync(dir, 0o755);
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o644 });
    return path;
  };
  const port = await freePort();
  const accessLog = join(dir, "access.log");
  const reResolve = nginxFollowsDns(binary);
  const conf = relayNginxConf({
    listen: `127.0.0.1:${port}`,
    function: options.function,
    timeoutSeconds: options.timeoutSeconds,
    resolver: options.resolver,
    reResolve,
    certFile: file("tls.crt", options.certificate.certPem),
    keyFile: file("tls.key", options.certificate.keyPem),
    functionKeyFile: file("function-key.conf", functionKeyInclude(options.functionKey)),
    trustedCaFile: file("function-ca.crt", options.trustedCaPem),
    runDir: dir,
    accessLog,
    ...(options.cluster === undefined
      ? {}
      : { cluster: { upstreamPathPrefix: memberPathPrefix(options.cluster.name), secretFile: file("cluster-secret.conf", clusterSecretInclude(options.cluster.secret)) } }),
  });
  const confFile = file("nginx.conf", conf);
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((path) => existsSync(path));
  const [command, args] = setpriv ? [setpriv, ["--pdeathsig", "KILL", "--", binary, "-c", confFile, "-e", "stderr"]] : [binary, ["-c", confFile, "-e", "stderr"]];
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
  live.add(child);
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", () => live.delete(child));

  const deadline = Date.now() + 10_000;
  while (!(await healthy(port, options.certificate.caPem))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`nginx did not start (exit ${child.exitCode}):\n${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    conf,
    reResolve,
    residentBytes: () => (child.pid === undefined ? 0 : processTree(child.pid).reduce((sum, pid) => sum + residentBytesOf(pid), 0)),
    accessLog: () => (existsSync(accessLog) ? readFileSync(accessLog, "utf8").trim().split("\n").filter(Boolean) : []),
    close: async () => {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
