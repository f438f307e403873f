import { credSpecCrd } from "./credSpecCrd.js";
import { mutatingWebhookConfiguration, validatingWebhookConfiguration, webhookConfigurationName, type WebhookTarget } from "./webhookConfigurations.js";
import { webhookClusterRole, webhookClusterRoleBinding, type WebhookSubject } from "./webhookRbac.js";

/**
 * Everything the product installs in a cluster, as plain objects: the one source that the local
 * cluster, the tests and the wiring command render from.
 */
export interface ClusterWiring {
  readonly target: WebhookTarget;
  readonly subject: WebhookSubject;
  readonly timeoutSeconds?: number;
  /** Leave the CRD out when the cluster already has one (the AKS gMSA add-on installs it). */
  readonly includeCrd?: boolean;
}

export type KubernetesObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } & Record<string, unknown> } & Record<string, unknown>;

export const defaultTimeoutSeconds = 5;

export function clusterManifests(wiring: ClusterWiring): KubernetesObject[] {
  const webhook = { target: wiring.target, timeoutSeconds: wiring.timeoutSeconds ?? defaultTimeoutSeconds, name: webhookConfigurationName };
  return [
    ...(wiring.includeCrd === false ? [] : [credSpecCrd()]),
    webhookClusterRole(),
    webhookClusterRoleBinding(wiring.subject),
    mutatingWebhookConfiguration(webhook),
    validatingWebhookConfiguration(webhook),
  ];
}
