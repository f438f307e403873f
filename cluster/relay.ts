import { createHash } from "node:crypto";
import { relayLimits } from "./relayLimits.js";
import { memberPathPrefix, type FleetMember } from "./fleetMember.js";
import { clusterSecretInclude, functionKeyInclude, relayNginxConf, type FunctionEndpoint } from "./relayNginxConf.js";
import { relayDefaultAllowFrom, relayNetworkPolicy, type RelayAllowedSource } from "./relayNetworkPolicy.js";
import type { WebhookTarget } from "./webhookConfigurations.js";
import { relayName, relayPodLabels } from "../lib/wiring/relayIngress.js";

/**
 * The relay: a stock nginx from a public registry, in the cluster, that the API server calls as a
 * `service` webhook and that forwards the three webhook paths to the Function App over HTTPS,
 * adding the function key. Standard AKS API servers cannot reach a URL outside the cluster;
 * they can reach a service. No image of ours, no Kubernetes API access, no token. Its nginx.conf
 * is relayNginxConf.ts; its limits, relayLimits.ts; who may reach it, relayNetworkPolicy.ts.
 */

export type { FunctionEndpoint } from "./relayNginxConf.js";

export interface RelayCertificate {
  /** What the webhook configurations' caBundle trusts. */
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

export interface RelayWiring {
  readonly function: FunctionEndpoint;
  readonly functionKey: string;
  readonly certificate: RelayCertificate;
  readonly namespace?: string;
  readonly image?: string;
  /** The DNS server nginx asks for the function's address (it re-resolves while running). */
  readonly resolver?: string;
  /** Who may connect to the relay (its NetworkPolicy); the konnectivity agents by default. */
  readonly allowFrom?: readonly RelayAllowedSource[];
  /**
   * The fleet member this relay serves: it forwards to the member's paths and adds its secret
   * header. None: today's single-cluster paths, no secret.
   */
  readonly cluster?: FleetMember;
  /** Overrides the pod template's checksum (templates that compute it elsewhere). */
  readonly podTemplateChecksum?: string;
}

export { relayName } from "../lib/wiring/relayIngress.js";
export const relayDefaultNamespace = "gmsa-admission";
/** nginx's own non-root image (uid 101, listens on unprivileged ports), pinned. */
export const relayDefaultImage = "docker.io/nginxinc/nginx-unprivileged:1.28.0-alpine";
export const relayDefaultResolver = "kube-dns.kube-system.svc.cluster.local";
export const relayContainerPort = 8443;
export const relayServicePort = 443;
/**
 * The relay's own PriorityClass. The built-in system-cluster-critical is meant for kube-system
 * (clusters may limit it there with a ResourceQuota scope), and the relay has a namespace of
 * its own: the highest value a class that is not a system one may have instead.
 */
export const relayPriorityClassName = relayName;
export const relayPriorityValue = 1_000_000_000;
export const relayChecksumAnnotation = "gmsa-admission.windows.k8s.io/relay-config-checksum";

const runAsUser = 101;
const paths = {
  config: "/etc/nginx/relay",
  tls: "/etc/nginx/relay-tls",
  functionKey: "/etc/nginx/relay-function-key",
  run: "/tmp",
  systemCaBundle: "/etc/ssl/certs/ca-certificates.crt",
};
const files = { config: "nginx.conf", functionKey: "function-key.conf", clusterSecret: "cluster-secret.conf", cert: "tls.crt", key: "tls.key", ca: "ca.crt" };

/** The relay's Secret that holds what it adds to every request: the function key, and a fleet member's secret. */
export const relayFunctionKeySecretName = `${relayName}-function-key`;
/** The key of that Secret that holds the member's secret header. */
export const relayClusterSecretKey = files.clusterSecret;
/** Where the relay's nginx reads the member's secret header from. */
export const relayClusterSecretFile = `${paths.functionKey}/${files.clusterSecret}`;

/** The labels the relay's pods carry (what its NetworkPolicy and Service select them by). */
const labels = relayPodLabels;
export { relayPodLabels };
const selector = { "app.kubernetes.io/name": relayName };

export function relayNamespace(relay: RelayWiring): string {
  return relay.namespace ?? relayDefaultNamespace;
}

/** The names the API server may check the relay's serving certificate against. */
export function relayServiceDnsNames(namespace: string): string[] {
  return [`${relayName}.${namespace}.svc`, `${relayName}.${namespace}.svc.cluster.local`];
}

export function relayServiceTarget(relay: RelayWiring): WebhookTarget {
  return { kind: "service", namespace: relayNamespace(relay), name: relayName, port: relayServicePort, caBundlePem: relay.certificate.caPem };
}

function base64(text: string): string {
  return Buffer.from(text).toString("base64");
}

function metadata(name: string, namespace: string, extra: Record<string, unknown> = {}) {
  return { name, namespace, labels, ...extra };
}

/** Every object of the relay, in the order they can be applied. */
export function relayObjects(relay: RelayWiring, timeoutSeconds: number) {
  const namespace = relayNamespace(relay);
  const conf = relayNginxConf({
    listen: String(relayContainerPort),
    function: relay.function,
    timeoutSeconds,
    resolver: relay.resolver ?? relayDefaultResolver,
    // The pinned image is nginx 1.28: it follows a new address of the Function App while running.
    reResolve: true,
    certFile: `${paths.tls}/${files.cert}`,
    keyFile: `${paths.tls}/${files.key}`,
    functionKeyFile: `${paths.functionKey}/${files.functionKey}`,
    trustedCaFile: paths.systemCaBundle,
    runDir: paths.run,
    accessLog: "/dev/stdout",
    ...(relay.cluster === undefined ? {} : { cluster: { upstreamPathPrefix: memberPathPrefix(relay.cluster.name), secretFile: relayClusterSecretFile } }),
  });
  const tlsData = { [files.cert]: base64(relay.certificate.certPem), [files.key]: base64(relay.certificate.keyPem), [files.ca]: base64(relay.certificate.caPem) };
  const keyData = {
    [files.functionKey]: base64(functionKeyInclude(relay.functionKey)),
    ...(relay.cluster === undefined ? {} : { [files.clusterSecret]: base64(clusterSecretInclude(relay.cluster.secret)) }),
  };
  // A new certificate, key, member secret or config restarts the pods: nginx reads them only at
  // start. The rollout keeps old pods serving until new ones are ready (maxUnavailable 0).
  const checksum =
    relay.podTemplateChecksum ??
    createHash("sha256")
      .update(JSON.stringify([conf, tlsData, keyData]))
      .digest("hex");

  return [
    {
      apiVersion: "scheduling.k8s.io/v1",
      kind: "PriorityClass",
      metadata: { name: relayPriorityClassName, labels },
      value: relayPriorityValue,
      // globalDefault is left out: false is its default, and the API server does not store a false.
      preemptionPolicy: "PreemptLowerPriority",
      description: "gmsa-admission relay: every pod with gMSA settings waits on it.",
    },
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: namespace,
        labels: {
          ...labels,
          // The relay satisfies the restricted profile; nothing else belongs here.
          "pod-security.kubernetes.io/enforce": "restricted",
          // No opt-out label: the relay's pods carry no GMSA settings, so the matchConditions
          // already keep them from the webhooks. The label would switch the checks off for
          // anything else in the namespace, and the Bicep module may be pointed at one that exists.
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: metadata(relayName, namespace),
      // The relay never talks to the Kubernetes API: no token, no RBAC.
      automountServiceAccountToken: false,
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: metadata(relayName, namespace),
      data: { [files.config]: conf },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: metadata(`${relayName}-tls`, namespace),
      type: "kubernetes.io/tls",
      data: tlsData,
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: metadata(relayFunctionKeySecretName, namespace),
      type: "Opaque",
      data: keyData,
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: metadata(relayName, namespace),
      spec: {
        type: "ClusterIP",
        selector,
        ports: [{ name: "https", port: relayServicePort, targetPort: "https", protocol: "TCP" }],
      },
    },
    // Before the pods exist: they never serve unprotected.
    relayNetworkPolicy({ name: relayName, namespace, labels, podSelector: selector, port: "https", allowFrom: relay.allowFrom ?? relayDefaultAllowFrom }),
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: metadata(relayName, namespace),
      spec: {
        replicas: 2,
        revisionHistoryLimit: 3,
        selector: { matchLabels: selector },
        // Never below the replicas that serve: a new pod is ready before an old one goes.
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        template: {
          metadata: { labels, annotations: { [relayChecksumAnnotation]: checksum } },
          spec: {
            serviceAccountName: relayName,
            automountServiceAccountToken: false,
            // Every GMSA pod waits on the relay: it is scheduled before ordinary workloads and may
            // run on AKS system pools, which carry the CriticalAddonsOnly taint.
            priorityClassName: relayPriorityClassName,
            tolerations: [{ key: "CriticalAddonsOnly", operator: "Exists" }],
            enableServiceLinks: false,
            nodeSelector: { "kubernetes.io/os": "linux" },
            topologySpreadConstraints: [
              // Two replicas on two nodes when there are two; cordoned nodes do not count.
              { maxSkew: 1, topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "DoNotSchedule", nodeTaintsPolicy: "Honor", labelSelector: { matchLabels: selector } },
              { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway", labelSelector: { matchLabels: selector } },
            ],
            securityContext: {
              runAsNonRoot: true,
              runAsUser,
              runAsGroup: runAsUser,
              fsGroup: runAsUser,
              seccompProfile: { type: "RuntimeDefault" },
            },
            containers: [
              {
                name: "nginx",
                image: relay.image ?? relayDefaultImage,
                imagePullPolicy: "IfNotPresent",
                command: ["nginx", "-c", `${paths.config}/${files.config}`, "-e", "stderr"],
                ports: [{ name: "https", containerPort: relayContainerPort, protocol: "TCP" }],
                readinessProbe: { httpGet: { path: "/healthz", port: "https", scheme: "HTTPS" }, periodSeconds: 5, failureThreshold: 2 },
                livenessProbe: { httpGet: { path: "/healthz", port: "https", scheme: "HTTPS" }, periodSeconds: 10, failureThreshold: 3 },
                // The memory limit covers nginx's worst case and the temp directory (relayLimits.ts).
                resources: {
                  requests: { cpu: "50m", memory: `${relayLimits.memoryRequestMiB}Mi` },
                  limits: { cpu: "500m", memory: `${relayLimits.memoryLimitMiB}Mi` },
                },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  runAsNonRoot: true,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [
                  { name: "config", mountPath: paths.config, readOnly: true },
                  { name: "tls", mountPath: paths.tls, readOnly: true },
                  { name: "function-key", mountPath: paths.functionKey, readOnly: true },
                  { name: "run", mountPath: paths.run },
                ],
              },
            ],
            volumes: [
              { name: "config", configMap: { name: relayName } },
              { name: "tls", secret: { secretName: `${relayName}-tls`, defaultMode: 0o440 } },
              { name: "function-key", secret: { secretName: `${relayName}-function-key`, defaultMode: 0o440 } },
              // Memory-backed, so its bytes count against the memory limit: bounded, and counted there.
              { name: "run", emptyDir: { medium: "Memory", sizeLimit: `${relayLimits.tempSizeLimitMiB}Mi` } },
            ],
          },
        },
      },
    },
    {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: metadata(relayName, namespace),
      spec: { minAvailable: 1, selector: { matchLabels: selector } },
    },
  ];
}
