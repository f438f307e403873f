import type * as https from "node:https";
import * as path from "node:path";
import { ManagedProcess, request, waitFor } from "./processes";

/** The controllers a local cluster runs: service accounts and their tokens, namespaces, GC and the workload controllers. */
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

export interface ControllerManagerOptions {
  readonly binDir: string;
  readonly dataDir: string;
  readonly port: number;
  readonly server: string;
  readonly kubeconfigPath: string;
  readonly caFile: string;
  readonly saKey: string;
  readonly adminTls: https.RequestOptions;
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
  readonly started: (process: ManagedProcess) => void;
}

export async function startControllerManager(options: ControllerManagerOptions): Promise<ManagedProcess> {
  options.log(`starting kube-controller-manager (secure port ${options.port})`);
  const kcm = ManagedProcess.start(
    "kube-controller-manager",
    path.join(options.binDir, "kube-controller-manager"),
    [
      `--kubeconfig=${options.kubeconfigPath}`,
      `--controllers=${CONTROLLERS.join(",")}`,
      `--service-account-private-key-file=${options.saKey}`,
      `--root-ca-file=${options.caFile}`,
      "--use-service-account-credentials=false",
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--secure-port=${options.port}`,
      `--cert-dir=${path.join(options.dataDir, "kube-controller-manager")}`,
      "--profiling=false",
    ],
    path.join(options.dataDir, "kube-controller-manager.log"),
  );
  options.started(kcm);
  // Ready when the service-account controller has made the default SA.
  await waitFor(kcm, "the default service account in namespace default", options.timeoutMs, async () => {
    return (await request(`${options.server}/api/v1/namespaces/default/serviceaccounts/default`, options.adminTls)).status === 200;
  });
  return kcm;
}
