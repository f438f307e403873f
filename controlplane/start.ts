/**
 * Starts a real local Kubernetes control plane (etcd + kube-apiserver, and
 * optionally kube-controller-manager) on loopback, for tests and `npm start`.
 * Binaries come from controlplane/build.sh (compiled from the Go module proxy
 * and cached per pinned version). The components live in their own modules
 * (etcd.ts, kubeApiserver.ts, controllerManager.ts, over processes.ts); this
 * one makes their certificates and starts them in order.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type * as https from "node:https";
import * as os from "node:os";
import * as path from "node:path";
import { ensureBinaries } from "./binaries";
import { startControllerManager } from "./controllerManager";
import { OWNER_FILE, removeStaleTempDirs, TEMP_PREFIX } from "./dataDir";
import { startEtcd } from "./etcd";
import { adminKubeconfigYaml, startKubeApiserver, tokenAuthLines } from "./kubeApiserver";
import { createCertificateAuthority, generateKeyPairPem, issueCertificate } from "./pki";
import { freePorts, installExitHandlers, ownedTempDirs, type ManagedProcess } from "./processes";

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
  const started = (proc: ManagedProcess): void => void procs.push(proc);
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
    const files = {
      caFile: file("ca.crt", ca.certPem),
      servingCert: file("apiserver.crt", serving.certPem),
      servingKey: file("apiserver.key", serving.keyPem),
      saKey: file("sa.key", saKeys.privateKeyPem),
      saPub: file("sa.pub", saKeys.publicKeyPem),
    };

    const [etcdClientPort, etcdPeerPort, apiPort, kcmPort] = (await freePorts(4)) as [number, number, number, number];
    const kubeconfigPath = path.join(dataDir, "kubeconfig");
    writeFileSync(kubeconfigPath, adminKubeconfigYaml(`https://127.0.0.1:${apiPort}`, ca.certPem, admin.certPem, admin.keyPem), { mode: 0o600 });
    const adminTls: https.RequestOptions = { ca: ca.certPem, cert: admin.certPem, key: admin.keyPem };

    const etcd = await startEtcd({ binDir, dataDir, clientPort: etcdClientPort, peerPort: etcdPeerPort, timeoutMs, log, started });
    const { server } = await startKubeApiserver({
      binDir,
      dataDir,
      port: apiPort,
      etcd,
      files,
      ...(opts.tokens && opts.tokens.length > 0 ? { tokenAuthFile: file("tokens.csv", tokenAuthLines(opts.tokens)) } : {}),
      adminTls,
      timeoutMs,
      log,
      started,
    });
    if (withControllerManager) {
      await startControllerManager({ binDir, dataDir, port: kcmPort, server, kubeconfigPath, caFile: files.caFile, saKey: files.saKey, adminTls, timeoutMs, log, started });
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
