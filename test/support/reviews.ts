import { randomUUID } from "node:crypto";

/** Builders for pods and AdmissionReviews, as the API server would send them. */
export interface ContainerSpec {
  name: string;
  image?: string;
  securityContext?: { windowsOptions?: { gmsaCredentialSpecName?: string; gmsaCredentialSpec?: string } };
}

export interface PodSpec {
  kind: "Pod";
  apiVersion: "v1";
  metadata: { name?: string; namespace?: string; generateName?: string; annotations?: Record<string, string> };
  spec: {
    serviceAccountName?: string;
    hostname?: string;
    securityContext?: { windowsOptions?: { gmsaCredentialSpecName?: string; gmsaCredentialSpec?: string } };
    containers: ContainerSpec[];
    initContainers?: ContainerSpec[];
    ephemeralContainers?: ContainerSpec[];
  };
}

export function gmsa(name?: string, contents?: string) {
  return { windowsOptions: { ...(name !== undefined ? { gmsaCredentialSpecName: name } : {}), ...(contents !== undefined ? { gmsaCredentialSpec: contents } : {}) } };
}

export function pod(overrides: { name?: string; namespace?: string; serviceAccountName?: string } = {}): PodSpec {
  return {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { name: overrides.name ?? "web-0", namespace: overrides.namespace ?? "apps" },
    spec: {
      ...(overrides.serviceAccountName ? { serviceAccountName: overrides.serviceAccountName } : {}),
      containers: [{ name: "iis", image: "mcr.microsoft.com/windows/servercore/iis" }],
    },
  };
}

export function review(
  operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT",
  object: unknown,
  options: { oldObject?: unknown; subResource?: string; apiVersion?: string; userInfo?: object; namespace?: string } = {},
) {
  const namespace = options.namespace ?? (object as PodSpec | undefined)?.metadata?.namespace ?? "apps";
  return {
    apiVersion: options.apiVersion ?? "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: randomUUID(),
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      ...(options.subResource ? { subResource: options.subResource } : {}),
      requestKind: { group: "", version: "v1", kind: "Pod" },
      name: (object as PodSpec | undefined)?.metadata?.name ?? "",
      namespace,
      operation,
      userInfo: options.userInfo ?? { username: "alice", uid: "u-1", groups: ["developers", "system:authenticated"] },
      ...(object !== undefined ? { object } : {}),
      ...(options.oldObject !== undefined ? { oldObject: options.oldObject } : {}),
      dryRun: false,
    },
  };
}

/** A pod whose one container names the credential spec (no contents): what a team writes. */
export function podNaming(credSpec: string): PodSpec {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa(credSpec);
  return p;
}
