import { createHash } from "node:crypto";
import { answerMarginMs } from "../lib/admission/handleReview.js";
import { relayLimits, relayMemoryBudget } from "./relayLimits.js";
import { relayDefaultAllowFrom, relayNetworkPolicy, type RelayAllowedSource } from "./relayNetworkPolicy.js";
import type { WebhookTarget } from "./webhookConfigurations.js";

/**
 * The relay: a stock nginx from a public registry, in the cluster, that the API server calls as a
 * `service` webhook and that forwards the two webhook paths to the Function App over HTTPS,
 * adding the function key. Standard AKS API servers cannot reach a URL outside the cluster;
 * they can reach a service. No image of ours, no Kubernetes API access, no token.
 */
export interface FunctionEndpoint {
  /** The Function App's DNS name: the TLS name checked, sent as SNI and as Host. */
  readonly host: string;
  readonly port: number;
}

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
  /** Overrides the pod template's checksum (templates that compute it elsewhere). */
  readonly podTemplateChecksum?: string;
}

export const relayName = "gmsa-admission-relay";
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
/** The header the Functions host reads a function key from. */
export const functionKeyHeader = "x-functions-key";

const runAsUser = 101;
const paths = {
  config: "/etc/nginx/relay",
  tls: "/etc/nginx/relay-tls",
  functionKey: "/etc/nginx/relay-function-key",
  run: "/tmp",
  systemCaBundle: "/etc/ssl/certs/ca-certificates.crt",
};
const files = { config: "nginx.conf", functionKey: "function-key.conf", cert: "tls.crt", key: "tls.key", ca: "ca.crt" };

const labels = { "app.kubernetes.io/name": relayName, "app.kubernetes.io/part-of": "gmsa-admission" };
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

export interface NginxConfOptions {
  /** nginx `listen` address: a port, or address:port. */
  readonly listen: string;
  readonly function: FunctionEndpoint;
  /** The webhook configurations' timeoutSeconds: the relay waits for the function's answer, not longer. */
  readonly timeoutSeconds: number;
  readonly resolver: string;
  /**
   * Whether nginx follows the function's address while running (`resolve` on the upstream
   * server, nginx 1.27.3 and later: the relay's image). Older nginx resolves it once, at start.
   */
  readonly reResolve: boolean;
  readonly certFile: string;
  readonly keyFile: string;
  /** A file holding the `proxy_set_header` line with the key: the key never sits in the config. */
  readonly functionKeyFile: string;
  /** CAs that may sign the Function App's certificate. */
  readonly trustedCaFile: string;
  /** Writable directory for the pid file and nginx's temporary paths. */
  readonly runDir: string;
  readonly accessLog: string;
}

/** The two paths the relay forwards; nothing else reaches the function. */
export const relayedPaths = ["/mutate", "/validate"] as const;

/** What the relay leaves the API server to receive the function's answer before it gives up itself. */
const relayAnswerMarginMs = 100;

/**
 * How long the relay waits for the function. The function answers within its budget, at most
 * the API server's `?timeout=` less answerMarginMs (lib/admission/handleReview.ts); the relay
 * waits longer than that, so the API server gets the function's answer (a clear denial) rather
 * than nginx's 504, and still gives up before the API server does.
 */
export function relayUpstreamTimeouts(timeoutSeconds: number): { readonly connectMs: number; readonly readMs: number; readonly functionBudgetMs: number } {
  const apiServerMs = timeoutSeconds * 1000;
  const functionBudgetMs = apiServerMs - answerMarginMs;
  const readMs = apiServerMs - relayAnswerMarginMs;
  return { connectMs: Math.min(readMs, 2000), readMs, functionBudgetMs };
}

/** Name of the upstream group: a keep-alive pool of connections to the function. */
const upstreamName = "gmsa_function";

/**
 * Only a `?timeout=` that reads as a Go duration is passed on; every other query argument stays
 * behind. Its characters cannot break out of the URI (digits, a dot, unit letters).
 */
const goDurationPattern = "^([0-9]{1,9}(\\.[0-9]{1,9})?(h|m|s|ms|us|ns)){1,4}$";

/** The relay's nginx.conf, for the cluster (defaults) or any other place it runs. */
export function relayNginxConf(options: NginxConfOptions): string {
  const { host, port } = options.function;
  const hostHeader = port === 443 ? host : `${host}:${port}`;
  const timeouts = relayUpstreamTimeouts(options.timeoutSeconds);
  const l = relayLimits;
  const budget = relayMemoryBudget();
  const location = (path: string) => `    location = ${path} {
      limit_conn relay_per_client ${l.requestsInFlightPerClient};
      limit_conn relay_total ${l.requestsInFlight};
      # Exactly this path, whatever the client wrote: nginx matched the normalised URI.
      proxy_pass https://${upstreamName}${path}$function_query;
    }
`;
  return `# gmsa-admission relay: forwards the API server's AdmissionReviews to the Function App.
# Generated by the wiring command; edit the renderer, not this file.
#
# Memory, worst case (the container's limit is ${l.memoryLimitMiB} MiB):
${budget.lines.map((line) => `#   ${line.mib.toFixed(1).padStart(5)} MiB  ${line.what}`).join("\n")}
#   ${budget.totalMiB.toFixed(1).padStart(5)} MiB  in all
daemon off;
worker_processes ${l.workerProcesses};
pid ${options.runDir}/nginx.pid;
error_log stderr warn;

events {
  worker_connections ${l.workerConnections};
}

http {
  log_format relay '$remote_addr [$time_iso8601] "$request_method $uri" $status $request_time $upstream_status $upstream_response_time $upstream_connect_time';
  access_log ${options.accessLog} relay;
  server_tokens off;

  client_body_temp_path ${options.runDir}/client-body;
  proxy_temp_path ${options.runDir}/proxy;
  fastcgi_temp_path ${options.runDir}/fastcgi;
  uwsgi_temp_path ${options.runDir}/uwsgi;
  scgi_temp_path ${options.runDir}/scgi;

  # Bodies up to the function's own limit; the first ${l.bodyBufferBytes / 1024} KiB in memory, the rest in the
  # temp directory (memory-backed, bounded by its sizeLimit).
  client_max_body_size ${l.maxBodyBytes};
  client_body_buffer_size ${l.bodyBufferBytes};
  client_header_buffer_size ${l.headerBufferBytes};
  large_client_header_buffers ${l.largeHeaderBuffers.count} ${l.largeHeaderBuffers.bytes};

  # A client that stalls loses its connection (and its memory) quickly; the TLS handshake counts
  # as header time.
  client_header_timeout ${l.clientHeaderTimeoutSeconds}s;
  client_body_timeout ${l.clientBodyTimeoutSeconds}s;
  send_timeout ${l.sendTimeoutSeconds}s;
  keepalive_timeout ${l.clientKeepaliveTimeoutSeconds}s;
  keepalive_requests ${l.clientKeepaliveRequests};
  reset_timedout_connection on;

  # Requests past their headers, per client address and in all; the rest get 429 at once.
  limit_conn_zone $binary_remote_addr zone=relay_per_client:1m;
  limit_conn_zone $server_port zone=relay_total:1m;
  limit_conn_status 429;
  limit_conn_log_level warn;

  # With \`resolve\` below, a new address of the Function App is followed without a restart.
  resolver ${options.resolver} valid=30s ipv6=off;
  resolver_timeout 2s;

  # One pool of TLS connections to the function, reused across admissions. A failed attempt never
  # takes an address out of use for a while (max_fails=0): every admission tries afresh.
  upstream ${upstreamName} {
    zone ${upstreamName} 64k;
    server ${host}:${port} max_fails=0${options.reResolve ? " resolve" : ""};
    keepalive ${l.functionKeepalive};
    keepalive_timeout ${l.functionKeepaliveTimeoutSeconds}s;
    keepalive_requests 1000;
  }

  map $arg_timeout $function_query {
    "~${goDurationPattern}" "?timeout=$arg_timeout";
    default "";
  }

  server {
    listen ${options.listen} ssl;
    ssl_certificate ${options.certFile};
    ssl_certificate_key ${options.keyFile};
    ssl_protocols TLSv1.2 TLSv1.3;

    # Only what the function needs goes on: no client credential, cookie or forwarding header.
    proxy_pass_request_headers off;
    proxy_set_header Host "${hostHeader}";
    proxy_set_header Connection "";
    proxy_set_header Content-Type $content_type;
    include ${options.functionKeyFile};
    proxy_http_version 1.1;
    proxy_buffering off;

    proxy_ssl_server_name on;
    proxy_ssl_name ${host};
    proxy_ssl_verify on;
    proxy_ssl_verify_depth 4;
    proxy_ssl_trusted_certificate ${options.trustedCaFile};
    proxy_ssl_protocols TLSv1.2 TLSv1.3;
    proxy_ssl_session_reuse on;

    # A pooled connection the function closed meanwhile is retried once on a new one: an
    # admission review is a question, asking it twice changes nothing.
    proxy_next_upstream error non_idempotent;
    proxy_next_upstream_tries 2;

    # The function answers within ${timeouts.functionBudgetMs} ms at most (timeoutSeconds ${options.timeoutSeconds} less its margin); the
    # relay waits a little longer, and still less than the API server.
    proxy_connect_timeout ${timeouts.connectMs}ms;
    proxy_send_timeout ${timeouts.readMs}ms;
    proxy_read_timeout ${timeouts.readMs}ms;

    location = /healthz {
      access_log off;
      default_type text/plain;
      return 200 "ok\\n";
    }

${relayedPaths.map(location).join("\n")}
    location / {
      return 404;
    }
  }
}
`;
}

/** The included file that adds the key; it lives in a Secret, not in the ConfigMap. */
export function functionKeyInclude(functionKey: string): string {
  return `proxy_set_header ${functionKeyHeader} "${functionKey}";\n`;
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
  });
  const tlsData = { [files.cert]: base64(relay.certificate.certPem), [files.key]: base64(relay.certificate.keyPem), [files.ca]: base64(relay.certificate.caPem) };
  const keyData = { [files.functionKey]: base64(functionKeyInclude(relay.functionKey)) };
  // A new certificate, key or config restarts the pods: nginx reads them only at start.
  const checksum = relay.podTemplateChecksum ?? createHash("sha256").update(JSON.stringify([conf, tlsData, keyData])).digest("hex");

  return [
    {
      apiVersion: "scheduling.k8s.io/v1",
      kind: "PriorityClass",
      metadata: { name: relayPriorityClassName, labels },
      value: relayPriorityValue,
      globalDefault: false,
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
          // The relay never carries GMSA settings; its pods must never wait on the webhooks.
          "windows.k8s.io/disabled": "true",
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
      metadata: metadata(`${relayName}-function-key`, namespace),
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
