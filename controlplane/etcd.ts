import * as path from "node:path";
import { ManagedProcess, request, waitFor } from "./processes";

/** etcd for one local control plane: plain HTTP on loopback, data in the plane's data dir, no fsync. */
export interface EtcdOptions {
  readonly binDir: string;
  readonly dataDir: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
  /** Called as soon as the process is spawned, so that a failed start still stops it. */
  readonly started: (process: ManagedProcess) => void;
}

export async function startEtcd(options: EtcdOptions): Promise<{ process: ManagedProcess; url: string }> {
  const url = `http://127.0.0.1:${options.clientPort}`;
  const peerUrl = `http://127.0.0.1:${options.peerPort}`;
  options.log(`starting etcd on ${url}`);
  const etcd = ManagedProcess.start(
    "etcd",
    path.join(options.binDir, "etcd"),
    [
      "--name=local",
      `--data-dir=${path.join(options.dataDir, "etcd")}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=local=${peerUrl}`,
      "--unsafe-no-fsync=true",
      "--log-level=warn",
    ],
    path.join(options.dataDir, "etcd.log"),
  );
  options.started(etcd);
  await waitFor(etcd, `${url}/health`, options.timeoutMs, async () => {
    const res = await request(`${url}/health`);
    return res.status === 200 && res.body.includes('"true"');
  });
  return { process: etcd, url };
}
