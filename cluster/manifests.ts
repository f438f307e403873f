import { auditObjects } from "./auditRbac.js";
import { canaryObjects } from "./canary.js";
import { safetyNetObjects } from "../lib/wiring/safetyNet.js";
import { credSpecCrd } from "../lib/wiring/credSpecCrd.js";
import { relayObjects, relayServiceTarget, type RelayWiring } from "./relay.js";
import { mutatingWebhookConfiguration, validatingWebhookConfiguration, webhookConfigurationName, type WebhookTarget } from "./webhookConfigurations.js";
import { webhookFlowSchema, webhookPriorityLevel } from "./webhookFlowSchema.js";
import { webhookClusterRole, webhookClusterRoleBinding, type WebhookSubject } from "./webhookRbac.js";

/** The relay in the cluster, which the webhook configurations address as a service. */
export type RelayTarget = { readonly kind: "relay" } & RelayWiring;

/**
 * Everything the product installs in a cluster, as plain objects: the one source that the local
 * cluster, the tests, the wiring command and the Bicep module render from.
 */
export interface ClusterWiring {
  readonly target: WebhookTarget | RelayTarget;
  readonly subject: WebhookSubject;
  readonly timeoutSeconds?: number;
  /** Leave the CRD out when the cluster already has one (the AKS gMSA add-on installs it). */
  readonly includeCrd?: boolean;
  /**
   * Relay mode: what the webhook configurations trust, when that is more than the relay's current
   * CA — during a certificate rotation, the CA of the pods still serving the old certificate too.
   */
  readonly relayCaBundlePem?: string;
  /**
   * The webhook runs with GMSA_AUTHORIZE_REQUESTING_USER: its ClusterRole must let it create
   * SubjectAccessReviews, or every GMSA pod is refused for want of that permission.
   */
  readonly authorizeRequestingUser?: boolean;
  /** The canary's namespace, service account and grant (cluster/canary.ts). Default true. */
  readonly canary?: boolean;
  /** The in-cluster safety net (lib/wiring/safetyNet.ts): the API server's own policies. Default true. */
  readonly safetyNet?: boolean;
  /** The audit's read-only role (cluster/auditRbac.ts), for GMSA_AUDIT. Default false. */
  readonly audit?: boolean;
}

export type KubernetesObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } & Record<string, unknown> } & Record<string, unknown>;

export const defaultTimeoutSeconds = 5;

/** The relay's current CA followed by previous ones still trusted (PEM; empty when none). */
export function relayCaBundle(currentCaPem: string, previousCaPem: string): string {
  return previousCaPem === "" ? currentCaPem : `${currentCaPem}\n${previousCaPem}`;
}

/** In apply order: the webhook configurations last, once what they point at exists. */
export function clusterManifests(wiring: ClusterWiring): KubernetesObject[] {
  const timeoutSeconds = wiring.timeoutSeconds ?? defaultTimeoutSeconds;
  const relay = wiring.target.kind === "relay" ? wiring.target : undefined;
  const target: WebhookTarget =
    wiring.target.kind === "relay"
      ? { ...relayServiceTarget(wiring.target), ...(wiring.relayCaBundlePem === undefined ? {} : { caBundlePem: wiring.relayCaBundlePem }) }
      : wiring.target;
  const webhook = { target, timeoutSeconds, name: webhookConfigurationName };
  return [
    ...(wiring.includeCrd === false ? [] : [credSpecCrd()]),
    webhookClusterRole({ authorizeRequestingUser: wiring.authorizeRequestingUser === true }),
    webhookClusterRoleBinding(wiring.subject),
    ...(wiring.canary === false ? [] : canaryObjects(wiring.subject)),
    ...(wiring.audit === true ? auditObjects(wiring.subject) : []),
    ...(wiring.safetyNet === false ? [] : safetyNetObjects({ authorizeRequestingUser: wiring.authorizeRequestingUser === true })),
    webhookPriorityLevel(),
    webhookFlowSchema(wiring.subject),
    ...(relay ? relayObjects(relay, timeoutSeconds) : []),
    mutatingWebhookConfiguration(webhook),
    validatingWebhookConfiguration(webhook),
  ];
}
