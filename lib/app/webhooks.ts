import { validateCredSpecObject } from "../credspec/validateCredSpecObject.js";
import { expandCredSpecs } from "../gmsa/expandCredSpecs.js";
import { podWebhook } from "../gmsa/podWebhook.js";
import { validatePod } from "../gmsa/validatePod.js";
import type { ReviewBudget } from "../admission/handleReview.js";
import type { MemberAddress } from "../fleet/fleetRouter.js";
import type { PodPorts } from "../gmsa/podWebhook.js";
import type { WebhookPolicy } from "../webhook/policy.js";

/**
 * The product's webhooks, and the routes each is served on: one static table that the Functions
 * adapter (functions/) registers from and the local host (host/) serves from.
 */
/** What every webhook is handed: the member's ports and the admission budget (the credential spec webhook uses none of them). */
export type AdmissionPolicy = WebhookPolicy<PodPorts & ReviewBudget>;

/** How a route addresses its cluster: today's paths, the cluster in the path, or the cluster and its secret. */
export type WebhookAddressing = MemberAddress["kind"];

export type WebhookName = "mutate" | "validate" | "validate-credspec";

export interface Webhook {
  readonly name: WebhookName;
  readonly policy: AdmissionPolicy;
}

export const webhooks: Readonly<Record<WebhookName, Webhook>> = {
  /** Inlines the named credential specs' contents into the pod. */
  mutate: { name: "mutate", policy: podWebhook(expandCredSpecs) },
  /** Checks use, existence and contents on CREATE, freezes GMSA settings on UPDATE. */
  validate: { name: "validate", policy: podWebhook(validatePod) },
  /** Checks a GMSACredentialSpec's contents when it is created or changed. */
  "validate-credspec": { name: "validate-credspec", policy: validateCredSpecObject },
};

/** One route a webhook is served on: its function name, its path under /api, and how it addresses its cluster. */
export interface WebhookRoute {
  readonly functionName: string;
  readonly route: string;
  readonly webhook: Webhook;
  readonly addressing: WebhookAddressing;
}

/**
 * A webhook's three routes: `<webhook>` (a single cluster), `clusters/{cluster}/<webhook>` (the
 * member's secret in a header, as the relay sends it) and `clusters/{cluster}/{secret}/<webhook>`
 * (url wiring, where the path is all the API server sends).
 */
export function webhookRoutesOf(webhook: Webhook): readonly WebhookRoute[] {
  const name = webhook.name;
  return [
    { functionName: name, route: name, webhook, addressing: "top" },
    { functionName: `cluster-${name}`, route: `clusters/{cluster}/${name}`, webhook, addressing: "header" },
    { functionName: `cluster-secret-${name}`, route: `clusters/{cluster}/{secret}/${name}`, webhook, addressing: "path" },
  ];
}

/** Every webhook route, by function name. */
export const webhookRoutes: ReadonlyMap<string, WebhookRoute> = new Map(
  Object.values(webhooks)
    .flatMap(webhookRoutesOf)
    .map((route) => [route.functionName, route]),
);
