import { X509Certificate } from "node:crypto";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { webhookConfigurationName } from "../wiring/webhooks.js";

/**
 * How long the API server will still trust the webhooks' endpoint: the days left before the CA
 * bundle of the mutating webhook configuration expires. The wiring issues the relay's CA and its
 * serving certificate together, with the same lifetime, so the bundle's expiry is the relay
 * certificate's; a bundle being rotated holds the previous CA beside the new one, and the newest
 * certificate of each webhook's bundle is the one that counts. Undefined when no webhook carries
 * a bundle (url wiring to a publicly trusted certificate) or the object is not one.
 */
const WebhookConfiguration = t.type({
  webhooks: t.array(t.type({ clientConfig: t.partial({ caBundle: t.string }) })),
});

export const mutatingWebhookConfigurationPath = `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${webhookConfigurationName}`;

const pemBlock = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const dayMs = 24 * 3600 * 1000;

export function caBundleDaysLeft(configuration: unknown, now = Date.now()): number | undefined {
  const decoded = WebhookConfiguration.decode(configuration);
  if (isLeft(decoded)) return undefined;
  let soonest: number | undefined;
  for (const webhook of decoded.right.webhooks) {
    const bundle = webhook.clientConfig.caBundle;
    if (!bundle) continue;
    let latest: number | undefined;
    for (const pem of Buffer.from(bundle, "base64").toString("utf8").match(pemBlock) ?? []) {
      try {
        const notAfter = Date.parse(new X509Certificate(pem).validTo);
        if (Number.isFinite(notAfter)) latest = Math.max(latest ?? notAfter, notAfter);
      } catch {
        // Not a certificate Node can read: the API server could not trust it either.
      }
    }
    if (latest !== undefined) soonest = Math.min(soonest ?? latest, latest);
  }
  return soonest === undefined ? undefined : Math.floor((soonest - now) / dayMs);
}
