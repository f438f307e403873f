import { KubeConfig } from "@kubernetes/client-node";
import { writeFileSync } from "node:fs";

/**
 * The one kubeconfig writer of the tests: a single cluster and user, as a KubeConfig object or as a
 * file, for the stand-ins and fakes that need one. (Tests about kubeconfig parsing itself, such as
 * a malformed file or one holding several contexts, write theirs by hand on purpose.)
 */
export interface KubeconfigFor {
  readonly server: string;
  /** The CA that signs the server's certificate (PEM); without it the system's roots are trusted. */
  readonly caPem?: string;
  /** A bearer token for the user; default none. */
  readonly token?: string;
  readonly skipTLSVerify?: boolean;
  readonly proxyUrl?: string;
  /** The cluster's name, in the kubeconfig and in messages. Default "c". */
  readonly clusterName?: string;
}

/** The kubeconfig as client-node loads it. */
export function kubeConfigFor(spec: KubeconfigFor): KubeConfig {
  const config = new KubeConfig();
  config.loadFromString(JSON.stringify(kubeconfigDocument(spec)));
  return config;
}

/** Writes the kubeconfig (JSON, which kubeconfig files may be) to `path`, readable by its owner only; returns the path. */
export function writeKubeconfig(path: string, spec: KubeconfigFor): string {
  writeFileSync(path, JSON.stringify(kubeconfigDocument(spec)), { mode: 0o600 });
  return path;
}

export function kubeconfigDocument(spec: KubeconfigFor): Record<string, unknown> {
  const name = spec.clusterName ?? "c";
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name,
        cluster: {
          server: spec.server,
          ...(spec.caPem === undefined ? {} : { "certificate-authority-data": Buffer.from(spec.caPem).toString("base64") }),
          ...(spec.skipTLSVerify === undefined ? {} : { "insecure-skip-tls-verify": spec.skipTLSVerify }),
          ...(spec.proxyUrl === undefined ? {} : { "proxy-url": spec.proxyUrl }),
        },
      },
    ],
    users: [{ name: "u", user: spec.token === undefined ? {} : { token: spec.token } }],
    contexts: [{ name: "x", context: { cluster: name, user: "u" } }],
    "current-context": "x",
  };
}
