import * as x509 from "@peculiar/x509";
import { createCertificateAuthority, issueCertificate } from "../controlplane/pki.js";
import { relayName, relayServiceDnsNames, type RelayCertificate } from "./relay.js";

/**
 * The relay's serving certificate, made at wiring time: a CA used once and forgotten (its key
 * is never kept, so nothing can issue another certificate under it) and a certificate for the
 * relay's service names. Wiring again re-issues it when it nears its end.
 */
export const relayCertificateValidityDays = 825;
/** A certificate with less than this left is replaced on the next wiring. */
export const relayCertificateRenewalDays = 60;

export async function issueRelayCertificate(namespace: string, validityDays = relayCertificateValidityDays): Promise<RelayCertificate> {
  const ca = await createCertificateAuthority(`${relayName} CA (${namespace})`, { validityDays });
  const dnsNames = relayServiceDnsNames(namespace);
  const serving = await issueCertificate(ca, { commonName: dnsNames[0] ?? relayName, dnsNames, usage: "server", validityDays });
  return { caPem: ca.certPem, certPem: serving.certPem, keyPem: serving.keyPem };
}

/**
 * The certificate already in the relay's TLS Secret, when it still fits: issued by the CA next to
 * it, for the service's names, with enough time left. Re-running the wiring then changes nothing.
 */
export async function reusableRelayCertificate(existing: Partial<RelayCertificate>, namespace: string, now = new Date()): Promise<RelayCertificate | undefined> {
  const { caPem, certPem, keyPem } = existing;
  if (!caPem || !certPem || !keyPem) return undefined;
  try {
    const cert = new x509.X509Certificate(certPem);
    const ca = new x509.X509Certificate(caPem);
    if (cert.notAfter.getTime() - now.getTime() < relayCertificateRenewalDays * 24 * 3600 * 1000) return undefined;
    if (!(await cert.verify({ publicKey: ca.publicKey, date: now }))) return undefined;
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
    const names = new Set(san?.names.items.filter((n) => n.type === "dns").map((n) => n.value) ?? []);
    if (!relayServiceDnsNames(namespace).every((name) => names.has(name))) return undefined;
    return { caPem, certPem, keyPem };
  } catch {
    return undefined;
  }
}
