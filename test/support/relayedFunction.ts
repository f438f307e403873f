import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { FleetMember } from "../../cluster/fleetMember.js";
import { clusterManifests } from "../../cluster/manifests.js";
import { relayName, relayServiceDnsNames, type RelayCertificate, type RelayWiring } from "../../cluster/relay.js";
import { relayCertificateValidityDays } from "../../cluster/relayCertificate.js";
import { mutatingWebhookConfiguration, validatingWebhookConfiguration, webhookConfigurationName } from "../../cluster/webhookConfigurations.js";
import { createCertificateAuthority, issueCertificate } from "../../controlplane/pki.js";
import { localWebhookUser } from "../../host/localCluster.js";
import { startDnsResponder, type DnsResponder } from "./dnsResponder.js";
import type { E2eCluster } from "./e2eCluster.js";
import { startFunctionHostProcess, type FunctionHostProcess } from "./functionHostProcess.js";
import { nginxFollowsDns, startRelayProcess, type RelayProcess } from "./relayProcess.js";

/**
 * Relay mode on one control plane, as the wiring renders it: the function host in a process of
 * its own with function keys required, the relay's manifests applied whole, and a real nginx
 * running the same config on loopback, which the webhook configurations address.
 *
 * In a cluster the webhook configurations address the relay by `service`; the API server then
 * dials the service's address through the cluster network. This control plane has no nodes,
 * pods or service network, so here the same configurations address the nginx on loopback by
 * `url`, with the relay's CA as caBundle. Everything past the API server's dial is the relay's
 * own: its nginx.conf, its certificate, its key (and member secret) header, its name
 * resolution, its timeouts.
 *
 * nginx 1.27.3 and later (the relay's image) resolve the function's name while running, through
 * the resolver the config names: here a DNS responder of the test's own. Older nginx (Debian
 * 12's) resolves an upstream's name once, at start, through the system: a name the system knows.
 */
export const followsDns = nginxFollowsDns();
export const functionHostName = followsDns ? "function-app.gmsa.test" : "localhost";

export interface RelayedFunction {
  readonly dns: DnsResponder;
  readonly functionHost: FunctionHostProcess;
  /** The function's own CA and serving certificate (another server may stand in for it under the same name). */
  readonly functionCertificate: { readonly caPem: string; readonly certPem: string; readonly keyPem: string };
  readonly functionKey: string;
  readonly relay: RelayProcess;
  readonly relayWiring: RelayWiring;
  close(): Promise<void>;
}

export interface RelayedFunctionOptions {
  /** Where the function's certificate files go; the caller removes it. */
  readonly dir: string;
  /**
   * What the function host serves: one cluster (today's paths), or the settings of a fleet
   * (GMSA_CLUSTERS and a GMSA_CLUSTER_SECRET_<NAME> per member).
   */
  readonly serves: { readonly kubeconfig: string } | { readonly fleet: Readonly<Record<string, string>> };
  /** A fleet member's relay (`--cluster NAME`): its paths on the function and its secret header. */
  readonly member?: FleetMember;
}

/** The relay's certificate as wiring issues it, with loopback, where this test's API server dials it. */
export async function relayCertificate(): Promise<RelayCertificate> {
  const ca = await createCertificateAuthority("relay CA", { validityDays: relayCertificateValidityDays });
  const serving = await issueCertificate(ca, {
    commonName: relayName,
    dnsNames: relayServiceDnsNames("gmsa-admission"),
    ipAddresses: ["127.0.0.1"],
    usage: "server",
    validityDays: relayCertificateValidityDays,
  });
  return { caPem: ca.certPem, certPem: serving.certPem, keyPem: serving.keyPem };
}

export async function startRelayedFunction(cluster: E2eCluster, options: RelayedFunctionOptions): Promise<RelayedFunction> {
  const started: Array<{ close(): Promise<void> }> = [];
  const close = async () => {
    for (const one of started.reverse()) await one.close().catch(() => {});
  };
  try {
    const dns = await startDnsResponder({ [functionHostName]: "127.0.0.1" });
    started.push(dns);

    // The function app: its own public-like name and certificate, keys required.
    const functionCa = await createCertificateAuthority("function CA");
    const functionCert = await issueCertificate(functionCa, { commonName: functionHostName, dnsNames: [functionHostName], ipAddresses: ["127.0.0.1"], usage: "server" });
    const certFile = join(options.dir, "function.crt");
    const keyFile = join(options.dir, "function.key");
    writeFileSync(certFile, functionCert.certPem);
    writeFileSync(keyFile, functionCert.keyPem, { mode: 0o600 });
    const functionKey = randomBytes(24).toString("base64url");
    const functionHost = await startFunctionHostProcess({
      ...("kubeconfig" in options.serves ? { kubeconfig: options.serves.kubeconfig } : { env: options.serves.fleet }),
      functionKey,
      certFile,
      keyFile,
    });
    started.push(functionHost);

    // Relay mode as the wiring renders it, applied whole; then nginx with the same config.
    const relayWiring: RelayWiring = {
      function: { host: functionHostName, port: functionHost.port },
      functionKey,
      certificate: await relayCertificate(),
      ...(options.member ? { cluster: options.member } : {}),
    };
    await cluster.apply(clusterManifests({ target: { kind: "relay", ...relayWiring }, subject: { kind: "User", name: localWebhookUser } }));
    const relay = await startRelayProcess({
      function: relayWiring.function,
      functionKey,
      certificate: relayWiring.certificate,
      trustedCaPem: functionCa.certPem,
      resolver: dns.resolver,
      timeoutSeconds: 5,
      ...(options.member ? { cluster: options.member } : {}),
    });
    started.push(relay);
    const target = { kind: "url", baseUrl: relay.url, caBundlePem: relayWiring.certificate.caPem } as const;
    await cluster.apply([
      mutatingWebhookConfiguration({ target, timeoutSeconds: 5, name: webhookConfigurationName }),
      validatingWebhookConfiguration({ target, timeoutSeconds: 5, name: webhookConfigurationName }),
    ]);
    return {
      dns,
      functionHost,
      functionCertificate: { caPem: functionCa.certPem, certPem: functionCert.certPem, keyPem: functionCert.keyPem },
      functionKey,
      relay,
      relayWiring,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** nginx writes a request's line just after answering: wait until the earlier ones are in. */
export async function settledAccessLog(relay: RelayProcess): Promise<number> {
  let count = relay.accessLog().length;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = relay.accessLog().length;
    if (now === count) return count;
    count = now;
  }
}
