/**
 * Starts a real local Kubernetes control plane (etcd + kube-apiserver, and
 * optionally kube-controller-manager) on loopback, for tests and `npm start`.
 * Binaries come from controlplane/build.sh (compiled from the Go module proxy
 * and cached per pinned version).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { createCertificateAuthority, generateKeyPairPem, issueCertificate } from "./pki";

export interface TokenUser {
  token: string;
  user: string;
  uid: string;
  groups: string[];
}

export interface StartOptions {
  /** Where certs, logs, etcd data and the kubeconfig go. Default: a new temp dir, removed by stop(). */
  dataDir?: string;
  /** Also run kube-controller-manager (service accounts, ReplicaSets, Deployments, GC...). Default true. */
  withControllerManager?: boolean;
  /** Static bearer tokens for extra users (kube-apiserver --token-auth-file). */
  tokens?: TokenUser[];
  /** Progress lines. Default: written to stderr. */
  log?: (line: string) => void;
  /** How long to wait for each component to become ready. Default 120 s. */
  timeoutMs?: number;
}

export interface ControlPlaneProcess {
  name: string;
  pid: number;
  logPath: string;
}

export interface ControlPlane {
  /** https://127.0.0.1:<port> */
  server: string;
  /** PEM of the cluster CA (signs the serving cert and the admin client cert). */
  caPem: string;
  /** Absolute path of the admin kubeconfig (client cert, O=system:masters). */
  kubeconfigPath: string;
  dataDir: string;
  binDir: string;
  /** The running processes, in start order. */
  processes: ControlPlaneProcess[];
  /** Stops every process (SIGTERM, SIGKILL after a few seconds) and removes a temp dataDir. */
  stop(): Promise<void>;
}

const BUILD_SCRIPT = path.join(__dirname, "build.sh");
const BINARIES = ["etcd", "kube-apiserver", "kube-controller-manager"] as const;
const STOP_GRACE_MS = 5000;
const LOG_TAIL_LINES = 30;
const CONTROLLERS = [
  "serviceaccount-token-controller",
  "serviceaccount-controller",
  "root-ca-certificate-publisher-controller",
  "namespace-controller",
  "garbage-collector-controller",
  "replicaset-controller",
  "deployment-controller",
  "statefulset-controller",
  "daemonset-controller",
  "job-controller",
  "cronjob-controller",
  "clusterrole-aggregation-controller",
  "endpointslice-controller",
];

// ---------------------------------------------------------------------------
// Child processes: killed with the parent (pdeathsig via setpriv where
// available, plus exit/signal handlers), logs to a file in dataDir.

class ManagedProcess {
  readonly exited: Promise<void>;
  exitDescription: string | undefined;

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly logPath: string,
  ) {
    this.exited = new Promise<void>((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitDescription = signal ? `killed by ${signal}` : `exited with code ${code}`;
        live.delete(this);
        resolve();
      });
    });
  }

  static start(name: string, binary: string, args: string[], logPath: string): ManagedProcess {
    const fd = openSync(logPath, "a");
    let child: ChildProcess;
    try {
      // setpriv --pdeathsig: the kernel sends SIGKILL to the child if this
      // process dies without running its exit handlers (e.g. it was SIGKILLed).
      const [cmd, cmdArgs] = SETPRIV ? [SETPRIV, ["--pdeathsig", "KILL", "--", binary, ...args]] : [binary, args];
      child = spawn(cmd, cmdArgs, { stdio: ["ignore", fd, fd], detached: false });
    } finally {
      closeSync(fd);
    }
    const proc = new ManagedProcess(name, child, logPath);
    if (child.pid === undefined) {
      // spawn failed (ENOENT...); 'error' follows asynchronously.
      child.once("error", (err) => {
        proc.exitDescription = `failed to start: ${err.message}`;
      });
    } else {
      live.add(proc);
    }
    child.on("error", () => undefined);
    return proc;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  logTail(lines = LOG_TAIL_LINES): string {
    try {
      const text = readFileSync(this.logPath, "utf8").trimEnd().split("\n");
      return text.slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  failure(message: string): Error {
    const state = this.running ? "still running" : (this.exitDescription ?? "exited");
    return new Error(`${this.name}: ${message} (${state}); last ${LOG_TAIL_LINES} lines of ${this.logPath}:\n${this.logTail()}`);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = STOP_GRACE_MS): Promise<"not-running" | "terminated" | "killed"> {
    if (!this.running) return "not-running";
    this.child.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), graceMs);
    });
    const outcome = await Promise.race([this.exited.then(() => "exited" as const), timeout]);
    clearTimeout(timer);
    if (outcome === "exited") return "terminated";
    this.child.kill("SIGKILL");
    await this.exited;
    return "killed";
  }
}

const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));
const live = new Set<ManagedProcess>();
/** Temp data dirs of running control planes, removed if this process exits without stop(). */
const ownedTempDirs = new Set<string>();
let handlersInstalled = false;

function killAllNow(): void {
  for (const proc of live) {
    try {
      proc.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const dir of ownedTempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // removed at the next start (removeStaleTempDirs)
    }
  }
  ownedTempDirs.clear();
}

function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", killAllNow);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = (): void => {
      killAllNow();
      // If nobody else handles the signal, keep its default effect (exit).
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, handler);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, handler);
  }
}

// ---------------------------------------------------------------------------
// Small helpers.

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Distinct free loopback ports (all held open at once, then released). */
async function freePorts(count: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i++) {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
      });
      const addr = server.address();
      if (addr === null || typeof addr === "string") throw new Error("no port");
      ports.push(addr.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

interface HttpResult {
  status: number;
  body: string;
}

function request(url: string, tls?: https.RequestOptions): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const mod = url.startsWith("https:") ? https : http;
    const req = mod.get(url, { ...tls, agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/** Polls `check` until it returns true; fails early if `proc` exits. */
async function waitFor(proc: ManagedProcess, what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = "";
  for (;;) {
    if (!proc.running) throw proc.failure(`exited while waiting for ${what}`);
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw proc.failure(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (${lastError})` : ""}`);
    }
    await delay(200);
  }
}

/** Runs build.sh (a no-op when the binaries are cached) and returns the bin dir. */
async function ensureBinaries(log: (line: string) => void): Promise<string> {
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

const TEMP_PREFIX = "gmsa-controlplane-";
const OWNER_FILE = "owner.pid";

/** Removes temp data dirs left behind by processes that died without cleaning up (e.g. SIGKILL). */
function removeStaleTempDirs(): void {
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

function kubeconfigYaml(server: string, caPem: string, certPem: string, keyPem: string): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: local",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${b64(caPem)}`,
    "users:",
    "- name: admin",
    "  user:",
    `    client-certificate-data: ${b64(certPem)}`,
    `    client-key-data: ${b64(keyPem)}`,
    "contexts:",
    "- name: admin@local",
    "  context:",
    "    cluster: local",
    "    user: admin",
    "    namespace: default",
    "current-context: admin@local",
    "",
  ].join("\n");
}

function csvField(value: string): string {
  if (/[",\n]/.test(value)) return `"${value.replace(/"/g, '""')}"`;
  return value;
}

// ---------------------------------------------------------------------------

export async function startControlPlane(opts: StartOptions = {}): Promise<ControlPlane> {
  const log = opts.log ?? ((line: string): void => void process.stderr.write(`${line}\n`));
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const withControllerManager = opts.withControllerManager ?? true;
  const startedAt = Date.now();

  const binDir = await ensureBinaries(log);
  const ownsDataDir = opts.dataDir === undefined;
  if (ownsDataDir) removeStaleTempDirs();
  const dataDir = path.resolve(opts.dataDir ?? mkdtempSync(path.join(os.tmpdir(), TEMP_PREFIX)));
  if (ownsDataDir) {
    writeFileSync(path.join(dataDir, OWNER_FILE), `${process.pid}\n`);
    ownedTempDirs.add(dataDir);
  }
  const pkiDir = path.join(dataDir, "pki");
  mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
  const file = (name: string, content: string): string => {
    const p = path.join(pkiDir, name);
    writeFileSync(p, content, { mode: 0o600 });
    return p;
  };

  installExitHandlers();
  const procs: ManagedProcess[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    for (const proc of [...procs].reverse()) {
      const t0 = Date.now();
      const outcome = await proc.stop();
      log(`${proc.name}: ${outcome} after ${Date.now() - t0} ms`);
    }
    if (ownsDataDir) {
      rmSync(dataDir, { recursive: true, force: true, maxRetries: 3 });
      ownedTempDirs.delete(dataDir);
    }
  };

  try {
    // PKI.
    const ca = await createCertificateAuthority("gmsa-admission-local-ca");
    const serving = await issueCertificate(ca, {
      commonName: "kube-apiserver",
      dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"],
      ipAddresses: ["127.0.0.1", "10.0.0.1"],
      usage: "server",
    });
    const admin = await issueCertificate(ca, {
      commonName: "admin",
      organizations: ["system:masters"],
      usage: "client",
    });
    const saKeys = generateKeyPairPem();
    const caFile = file("ca.crt", ca.certPem);
    const servingCert = file("apiserver.crt", serving.certPem);
    const servingKey = file("apiserver.key", serving.keyPem);
    const saKey = file("sa.key", saKeys.privateKeyPem);
    const saPub = file("sa.pub", saKeys.publicKeyPem);

    const [etcdClientPort, etcdPeerPort, apiPort, kcmPort] = (await freePorts(4)) as [number, number, number, number];
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = path.join(dataDir, "kubeconfig");
    writeFileSync(kubeconfigPath, kubeconfigYaml(server, ca.certPem, admin.certPem, admin.keyPem), { mode: 0o600 });
    const adminTls: https.RequestOptions = { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem };

    // etcd.
    const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    log(`starting etcd on ${etcdUrl}`);
    const etcd = ManagedProcess.start(
      "etcd",
      path.join(binDir, "etcd"),
      [
        "--name=local",
        `--data-dir=${path.join(dataDir, "etcd")}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=local=${peerUrl}`,
        "--unsafe-no-fsync=true",
        "--log-level=warn",
      ],
      path.join(dataDir, "etcd.log"),
    );
    procs.push(etcd);
    await waitFor(etcd, `${etcdUrl}/health`, timeoutMs, async () => {
      const res = await request(`${etcdUrl}/health`);
      return res.status === 200 && res.body.includes('"true"');
    });

    // kube-apiserver.
    const apiArgs = [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      // The lease endpoint reconciler refuses loopback addresses; nothing in
      // this cluster needs the kubernetes Service's endpoints.
      "--endpoint-reconciler-type=none",
      `--secure-port=${apiPort}`,
      `--tls-cert-file=${servingCert}`,
      `--tls-private-key-file=${servingKey}`,
      `--client-ca-file=${caFile}`,
      "--authorization-mode=Node,RBAC",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--allow-privileged=true",
      `--cert-dir=${path.join(dataDir, "apiserver")}`,
      "--profiling=false",
    ];
    if (opts.tokens && opts.tokens.length > 0) {
      const lines = opts.tokens.map((t) => [t.token, t.user, t.uid, t.groups.join(",")].map(csvField).join(","));
      apiArgs.push(`--token-auth-file=${file("tokens.csv", `${lines.join("\n")}\n`)}`);
    }
    log(`starting kube-apiserver on ${server}`);
    const apiserver = ManagedProcess.start("kube-apiserver", path.join(binDir, "kube-apiserver"), apiArgs, path.join(dataDir, "kube-apiserver.log"));
    procs.push(apiserver);
    await waitFor(apiserver, `${server}/readyz`, timeoutMs, async () => {
      if (!etcd.running) throw etcd.failure("exited");
      return (await request(`${server}/readyz`, adminTls)).status === 200;
    });
    await waitFor(apiserver, "the default namespace", timeoutMs, async () => {
      return (await request(`${server}/api/v1/namespaces/default`, adminTls)).status === 200;
    });

    // kube-controller-manager.
    if (withControllerManager) {
      log(`starting kube-controller-manager (secure port ${kcmPort})`);
      const kcm = ManagedProcess.start(
        "kube-controller-manager",
        path.join(binDir, "kube-controller-manager"),
        [
          `--kubeconfig=${kubeconfigPath}`,
          `--controllers=${CONTROLLERS.join(",")}`,
          `--service-account-private-key-file=${saKey}`,
          `--root-ca-file=${caFile}`,
          "--use-service-account-credentials=false",
          "--leader-elect=false",
          "--bind-address=127.0.0.1",
          `--secure-port=${kcmPort}`,
          `--cert-dir=${path.join(dataDir, "kube-controller-manager")}`,
          "--profiling=false",
        ],
        path.join(dataDir, "kube-controller-manager.log"),
      );
      procs.push(kcm);
      // Ready when the service-account controller has made the default SA.
      await waitFor(kcm, "the default service account in namespace default", timeoutMs, async () => {
        return (await request(`${server}/api/v1/namespaces/default/serviceaccounts/default`, adminTls)).status === 200;
      });
    }

    log(`control plane ready at ${server} in ${((Date.now() - startedAt) / 1000).toFixed(1)} s (kubeconfig ${kubeconfigPath})`);
    return {
      server,
      caPem: ca.certPem,
      kubeconfigPath,
      dataDir,
      binDir,
      processes: procs.map((p) => ({ name: p.name, pid: p.pid, logPath: p.logPath })),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
