import { X509Certificate } from "node:crypto";
import { caBundlePem } from "../lib/kube/apiServerEndpoint.js";

/**
 * Which CAs the webhook configurations must keep trusting while the relay's pods move to a new
 * certificate. Old pods serve the certificate of the Secret they started from until they are
 * replaced, so a caBundle holding only the new CA would refuse every GMSA pod that reaches one.
 */

/** Each certificate of a PEM bundle, as PEM; none when it holds no certificate that parses. */
export function certificatesOf(bundle: string): string[] {
  let pem: string;
  try {
    pem = caBundlePem(bundle, "CA bundle");
  } catch {
    return [];
  }
  return pem
    .split(/(?<=-----END CERTIFICATE-----)\n/)
    .map((block) => block.trim())
    .filter((block) => block !== "")
    .map((block) => `${block}\n`);
}

function fingerprint(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

/**
 * The CAs, other than the new one, that relay pods may be serving under: the CA of the TLS Secret
 * the running pods started from, and any the webhook configurations still trust for the relay (a
 * rotation whose rollout was not seen to finish). One PEM text, empty when there are none.
 */
export function previousRelayCas(newCaPem: string, stillServing: readonly string[]): string {
  const current = new Set(certificatesOf(newCaPem).map(fingerprint));
  const seen = new Set<string>();
  const previous: string[] = [];
  for (const certificate of stillServing.flatMap(certificatesOf)) {
    const id = fingerprint(certificate);
    if (current.has(id) || seen.has(id)) continue;
    seen.add(id);
    previous.push(certificate);
  }
  return previous.join("");
}
