import { KubeConfig } from "@kubernetes/client-node";
import { applyObjects } from "../cluster/applyObjects.js";
import { credSpecCrd } from "../lib/wiring/credSpecCrd.js";
import type { KubernetesObject } from "../cluster/manifests.js";
import { safetyNetObjects } from "../lib/wiring/safetyNet.js";
import { excludedNamespaceLabel } from "../cluster/webhookConfigurations.js";
import { startControlPlane } from "../controlplane/start.js";
import { kubeRequest } from "../test/support/kubeRequest.js";

/**
 * The safety net's cost (`npm run bench -- safety-net`, or BENCH_ONLY=safety-net): GMSA pod
 * creations through a real kube-apiserver with the in-cluster policies installed and no webhook,
 * alternating one by one between a namespace the policies match and one labelled out of them
 * (windows.k8s.io/disabled=true), so both series share the API server, its caches and the
 * machine's load. Each pod names as many credential specs as BENCH_SAFETY_NET_NAMES (default 1),
 * granted to its service account through a Role: the policy asks the authorizer once per name.
 * Figures are printed, never asserted.
 */
const creations = Number(process.env.BENCH_SAFETY_NET_PODS ?? 300);
const namesPerPod = Number(process.env.BENCH_SAFETY_NET_NAMES ?? 1);

export function safetyNetOnly(): boolean {
  return process.env.BENCH_ONLY === "safety-net" || process.argv.slice(2).includes("safety-net");
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

export async function safetyNetBench(): Promise<void> {
  console.log(`safety net: a local control plane, ${creations} GMSA pods each way naming ${namesPerPod} spec(s), alternating…`);
  const controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
  try {
    const admin = new KubeConfig();
    admin.loadFromFile(controlPlane.kubeconfigPath);
    const names = Array.from({ length: namesPerPod }, (_, i) => `spec-${i}`);
    const namespaces = { checked: "checked", unchecked: "unchecked" };
    const grant = (namespace: string): KubernetesObject[] => [
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "app", namespace } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "use-specs", namespace },
        rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], resourceNames: names, verbs: ["use"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "use-specs", namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "use-specs" },
        subjects: [{ kind: "ServiceAccount", name: "app", namespace }],
      },
    ];
    await applyObjects(admin, [
      credSpecCrd() as KubernetesObject,
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespaces.checked } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespaces.unchecked, labels: { [excludedNamespaceLabel.key]: excludedNamespaceLabel.value } } },
      ...grant(namespaces.checked),
      ...grant(namespaces.unchecked),
      ...(safetyNetObjects({ authorizeRequestingUser: false }) as KubernetesObject[]),
    ]);
    let serial = 0;
    const create = async (namespace: string, serviceAccount: string): Promise<{ status: number; ms: number }> => {
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `pod-${++serial}`, namespace },
        spec: {
          serviceAccountName: serviceAccount,
          containers: names.map((name, i) => ({
            name: `c${i}`,
            image: "mcr.microsoft.com/windows/servercore:ltsc2022",
            securityContext: { windowsOptions: { gmsaCredentialSpecName: name } },
          })),
        },
      };
      const started = process.hrtime.bigint();
      const reply = await kubeRequest(admin, "POST", `/api/v1/namespaces/${namespace}/pods`, pod);
      return { status: reply.status, ms: Number(process.hrtime.bigint() - started) / 1e6 };
    };
    // The policies are enforced a moment after they are stored: wait until a pod without the grant is refused.
    for (const deadline = Date.now() + 20_000; ;) {
      if ((await create(namespaces.checked, "nobody")).status >= 400) break;
      if (Date.now() > deadline) throw new Error("the safety net was not enforced within 20 s");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Warm both paths, then alternate.
    for (let i = 0; i < 20; i++) {
      await create(namespaces.checked, "app");
      await create(namespaces.unchecked, "app");
    }
    const checked: number[] = [];
    const unchecked: number[] = [];
    for (let i = 0; i < creations; i++) {
      for (const [namespace, into] of i % 2 === 0
        ? ([
            [namespaces.checked, checked],
            [namespaces.unchecked, unchecked],
          ] as const)
        : ([
            [namespaces.unchecked, unchecked],
            [namespaces.checked, checked],
          ] as const)) {
        const { status, ms } = await create(namespace, "app");
        if (status !== 201) throw new Error(`a granted pod in ${namespace} was answered ${status}`);
        into.push(ms);
      }
    }
    const row = (label: string, values: number[]) =>
      `| ${label} | ${percentile(values, 50).toFixed(2)} ms | ${percentile(values, 90).toFixed(2)} ms | ${percentile(values, 99).toFixed(2)} ms |`;
    console.log(`\nSafety net: GMSA pod creation through the API server, ${creations} each, ${namesPerPod} name(s) per pod, no webhook`);
    console.log("| pods | p50 | p90 | p99 |\n|---|---|---|---|");
    console.log(row("the policies evaluated", checked));
    console.log(row("namespace labelled out of them", unchecked));
    console.log(`median difference: ${(percentile(checked, 50) - percentile(unchecked, 50)).toFixed(2)} ms\n`);
  } finally {
    await controlPlane.stop();
  }
}
