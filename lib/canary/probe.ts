/**
 * Whether a wired cluster admits GMSA pods through the product, proved the way a real pod would be:
 * the cluster's API server is asked for a server-side dry run (`dryRun=All`: nothing is stored) of
 * a pod naming a credential spec its service account may not use. The API server calls the webhooks
 * through the path the wiring configured (the relay, or the function's URL); the function asks the
 * API server, with its own identity, whether the account may `use` the spec; and the right answer is
 * the webhook's 403 (or, where RBAC lets every account use every spec, its 422 for a spec that does
 * not exist). Any other answer names the hop that failed. The pod names a spec no cluster has (a
 * random name), in a namespace the webhooks cover, as a service account that exists there; nothing
 * is created, so the check needs no object of its own.
 */
export type ReadinessHop =
  /** The answer the policy must give: the whole path works. */
  | "ready"
  /** The API server admitted the pod: the webhooks did not run (not wired, the namespace excluded, or failurePolicy Ignore hiding a failed call). */
  | "webhooksDidNotRun"
  /** The API server could not call the webhook: TLS (x509), the relay or URL (404, connection refused, DNS), the function key (401), a timeout. */
  | "apiServerToWebhook"
  /** The webhook answered but could not reach the API server itself (its network path, or the API server's address and CA). */
  | "functionToApiServer"
  /** The webhook reached the API server but its own identity was refused (its Entra token, or its RBAC on access reviews). */
  | "functionIdentity"
  /** The check's own inputs are wrong: its namespace or service account does not exist. Asking again will not help. */
  | "checkInput"
  /** Something else answered: the check could not even ask (the kubeconfig's own access), or an answer no hop explains. */
  | "unexpected";

export interface ReadinessResult {
  readonly hop: ReadinessHop;
  /** In plain words, for the person deploying: what happened and what to look at. */
  readonly summary: string;
  /** The API server's answer (status and message), for the log. */
  readonly detail: string;
  /** Days before the webhooks' CA bundle expires (lib/canary/webhookCa.ts), when the canary could read it. */
  readonly caBundleDaysLeft?: number;
}

export interface ReadinessOptions {
  /** Where the dry-run pod would run: a namespace the webhooks cover. Default "default". */
  readonly namespace?: string;
  /** Its service account, which must exist there. Default "default". */
  readonly serviceAccount?: string;
  readonly timeoutMs?: number;
}

// At the start of the message: text quoted later in it (a name, another webhook's words) cannot pass for it.
const ourWebhook = /^admission webhook "(mutate|validate)\.gmsa-admission\.windows\.k8s\.io" denied the request: /;

/** The pod the check asks about: Windows, a random credential spec name, nothing else. */
export function readinessPod(namespace: string, serviceAccount: string, credSpec: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { generateName: "gmsa-admission-readiness-", namespace, labels: { "app.kubernetes.io/name": "gmsa-admission-readiness" } },
    spec: {
      serviceAccountName: serviceAccount,
      nodeSelector: { "kubernetes.io/os": "windows" },
      securityContext: { windowsOptions: { gmsaCredentialSpecName: credSpec } },
      containers: [{ name: "readiness", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }],
    },
  };
}

function messageOf(body: unknown): string {
  if (typeof body === "object" && body !== null && typeof (body as { message?: unknown }).message === "string") return (body as { message: string }).message;
  return typeof body === "string" ? body : JSON.stringify(body ?? "");
}

/** What the API server's answer to the dry run says about the path. */
export function classifyReadiness(reply: { readonly status: number; readonly body: unknown }, credSpec: string): ReadinessResult {
  const message = messageOf(reply.body);
  const detail = `HTTP ${reply.status}: ${message}`.slice(0, 2000);
  const result = (hop: ReadinessHop, summary: string): ReadinessResult => ({ hop, summary, detail });
  if (/namespaces? "[^"]*" not found/.test(message)) {
    return result("checkInput", "the check's namespace does not exist: give one the webhooks cover with --check-namespace");
  }
  if (/service ?account "?[^"]*"? not found|error looking up service account/i.test(message)) {
    return result("checkInput", "the check's service account does not exist in its namespace: give one that does with --check-service-account (every namespace has default)");
  }
  if (reply.status === 200 || reply.status === 201) {
    return result(
      "webhooksDidNotRun",
      "the API server admitted a pod naming a credential spec nobody may use: the webhooks did not run. Check that the webhook configurations exist (npm run wire ... --apply), that the namespace is not labelled windows.k8s.io/disabled=true, and that failurePolicy is Fail (Ignore hides a failing call)",
    );
  }
  if (ourWebhook.test(message)) {
    if (message.includes(`is not authorized to use GMSACredentialSpec "${credSpec}"`) || message.includes(`GMSACredentialSpec "${credSpec}" does not exist`)) {
      return result(
        "ready",
        "ready: the API server called the webhooks through the wiring, and the function asked the API server with its own identity and refused the pod as it must",
      );
    }
    if (/could not be checked: the Kubernetes API server (could not be reached|did not answer|answered with an error)/.test(message)) {
      return result(
        "functionToApiServer",
        "the API server reached the function, but the function could not reach the API server: check the function's network path to it (private cluster: VNet integration and DNS), and its address and CA (GMSA_AKS_RESOURCE_ID or GMSA_API_SERVER_URL); the function's log line under the correlation ID in the message says more",
      );
    }
    if (message.includes("could not be checked: the webhook's own access to the cluster failed")) {
      return result(
        "functionIdentity",
        "the function reached the API server but its identity was refused: check its managed identity (AZURE_CLIENT_ID), its access to the cluster (Azure RBAC or the wiring's ClusterRoleBinding for --identity), and the function's log line under the correlation ID",
      );
    }
    return result("unexpected", "the webhooks answered, but not as the check expects: read the message");
  }
  if (/failed calling webhook|failed to call webhook/i.test(message)) {
    // The API server's words; the webhook URL it quotes carries "?timeout=", which says nothing.
    const words = message.replace(/\?timeout=\d+s/g, "");
    // A server that went away under a connection the API server kept open: EOF, reset, closed idle.
    const why = /connection refused|no such host|no endpoints|dial tcp|connection reset by peer|broken pipe|server closed idle connection|: EOF\b/i.test(words)
      ? "the webhook's address cannot be reached from the API server (the relay's pods and Service, DNS, or the network between them)"
      : /x509|certificate/i.test(words)
        ? "its TLS certificate is not trusted (the caBundle of the webhook configurations, or the relay's certificate)"
        : /deadline exceeded|Client\.Timeout|i\/o timeout|timed out/i.test(words)
          ? "the call timed out (a cold start past timeoutSeconds, or a network path that drops packets)"
          : // client-go words a 401 as the server asking for credentials (k8s.io/apimachinery's StatusReasonUnauthorized).
            /\b401\b|unauthori[sz]ed|asked for the client to provide credentials/i.test(words)
            ? "the function refused the call with 401 (the function key the relay sends, or the endpoint protection settings)"
            : /\b404\b|not found|could not find the requested resource/i.test(words)
              ? "nothing answers at the webhook's path (the function URL, the member's path, or the app loaded no function)"
              : "see the message";
    return result("apiServerToWebhook", `the API server could not call the webhook: ${why}`);
  }
  if (reply.status === 401 || reply.status === 403) {
    return result("unexpected", "the check itself was refused by the API server: the kubeconfig it runs with needs to create pods (a dry run) in the namespace");
  }
  return result("unexpected", "the API server gave an answer no hop explains: read the message");
}

/** A credential spec name no cluster has (63 characters at most, lower case). */
export function unknownCredSpecName(randomHex: string): string {
  return `gmsa-admission-readiness-${randomHex}`;
}

/** Where the function's canary asks (cluster/canary.ts renders them). */
export const canaryTarget = { namespace: "gmsa-admission-canary", serviceAccount: "canary" } as const;

/**
 * The canary's reading of an answer to its own dry run, asked with the function's identity: as
 * the readiness check's, except that a refusal of the dry run itself is the function's own access
 * (its token, or the canary's grant the wiring renders), not a kubeconfig's.
 */
export function classifyCanary(reply: { readonly status: number; readonly body: unknown }, credSpec: string): ReadinessResult {
  const result = classifyReadiness(reply, credSpec);
  if (result.hop !== "unexpected") return result;
  if (reply.status === 401) {
    return {
      ...result,
      hop: "functionIdentity",
      summary: "the API server refused the function's token for the canary's dry run: check its managed identity and its access to the cluster",
    };
  }
  if (reply.status === 403 && /cannot create resource "pods"/.test(result.detail)) {
    return {
      ...result,
      hop: "checkInput",
      summary: `the function's identity may not ask for dry runs in namespace ${canaryTarget.namespace}: wire the cluster again (without --no-canary) to install the canary's grant`,
    };
  }
  return result;
}
