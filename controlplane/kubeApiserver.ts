import type * as https from "node:https";
import * as path from "node:path";
import { ManagedProcess, request, waitFor } from "./processes";

/** kube-apiserver for one local control plane: TLS on loopback, RBAC, client certificates and optional static tokens. */
export interface KubeApiserverOptions {
  readonly binDir: string;
  readonly dataDir: string;
  readonly port: number;
  readonly etcd: { readonly process: ManagedProcess; readonly url: string };
  readonly files: { readonly caFile: string; readonly servingCert: string; readonly servingKey: string; readonly saKey: string; readonly saPub: string };
  /** A --token-auth-file, when static tokens were asked for. */
  readonly tokenAuthFile?: string;
  /** The admin client certificate, to ask the server whether it is ready. */
  readonly adminTls: https.RequestOptions;
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
  readonly started: (process: ManagedProcess) => void;
}

export async function startKubeApiserver(options: KubeApiserverOptions): Promise<{ process: ManagedProcess; server: string }> {
  const server = `https://127.0.0.1:${options.port}`;
  const { files } = options;
  const args = [
    `--etcd-servers=${options.etcd.url}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    // The lease endpoint reconciler refuses loopback addresses; nothing in
    // this cluster needs the kubernetes Service's endpoints.
    "--endpoint-reconciler-type=none",
    `--secure-port=${options.port}`,
    `--tls-cert-file=${files.servingCert}`,
    `--tls-private-key-file=${files.servingKey}`,
    `--client-ca-file=${files.caFile}`,
    "--authorization-mode=Node,RBAC",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${files.saPub}`,
    `--service-account-signing-key-file=${files.saKey}`,
    "--service-cluster-ip-range=10.0.0.0/24",
    "--allow-privileged=true",
    `--cert-dir=${path.join(options.dataDir, "apiserver")}`,
    "--profiling=false",
    ...(options.tokenAuthFile ? [`--token-auth-file=${options.tokenAuthFile}`] : []),
  ];
  options.log(`starting kube-apiserver on ${server}`);
  const apiserver = ManagedProcess.start("kube-apiserver", path.join(options.binDir, "kube-apiserver"), args, path.join(options.dataDir, "kube-apiserver.log"));
  options.started(apiserver);
  const etcd = options.etcd.process;
  await waitFor(apiserver, `${server}/readyz`, options.timeoutMs, async () => {
    if (!etcd.running) throw etcd.failure("exited");
    return (await request(`${server}/readyz`, options.adminTls)).status === 200;
  });
  await waitFor(apiserver, "the default namespace", options.timeoutMs, async () => {
    return (await request(`${server}/api/v1/namespaces/default`, options.adminTls)).status === 200;
  });
  return { process: apiserver, server };
}

/** The lines of a --token-auth-file: token, user, uid, groups. */
export function tokenAuthLines(tokens: readonly { token: string; user: string; uid: string; groups: readonly string[] }[]): string {
  return `${tokens.map((t) => [t.token, t.user, t.uid, t.groups.join(",")].map(csvField).join(",")).join("\n")}\n`;
}

/** The admin kubeconfig: the plane's CA and a system:masters client certificate. */
export function adminKubeconfigYaml(server: string, caPem: string, certPem: string, keyPem: string): string {
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
