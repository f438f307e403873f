import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface ServingCertificate {
  readonly certPem: string;
  readonly keyPem: string;
  /** What a client (the API server's caBundle) must trust. */
  readonly caPem: string;
  /** Where the CA bundle was written, when it was generated here. */
  readonly caFile?: string;
}

export function cacheDir(): string {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "gmsa-admission");
}

export function servingCertificateFromFiles(cert: string, key: string): ServingCertificate {
  const certPem = readFileSync(cert, "utf8");
  return { certPem, keyPem: readFileSync(key, "utf8"), caPem: certPem };
}

/**
 * A serving certificate for the loopback names, issued at each start by a CA kept in `dir` and
 * reused while it has more than a week left: every `npm start` on this machine presents a
 * certificate the same printed CA bundle verifies, so a second start does not make the bundle a
 * first one printed (or a cluster wired with it) wrong.
 */
export async function generateServingCertificate(dir = join(cacheDir(), "local-host")): Promise<ServingCertificate> {
  // The X.509 library is loaded only by a host that makes its own certificate.
  const { createCertificateAuthority, issueCertificate } = await import("../controlplane/pki.js");
  mkdirSync(dir, { recursive: true });
  const caFile = join(dir, "ca.crt");
  const keyFile = join(dir, "ca.key");
  let ca = keptAuthority(caFile, keyFile);
  if (ca === undefined) {
    ca = await createCertificateAuthority("gmsa-admission local host CA", { validityDays: 365 });
    // Key first, owner-only; each file replaced whole, never half written.
    writeFileSync(`${keyFile}.${process.pid}`, ca.keyPem, { mode: 0o600 });
    renameSync(`${keyFile}.${process.pid}`, keyFile);
    writeFileSync(`${caFile}.${process.pid}`, ca.certPem);
    renameSync(`${caFile}.${process.pid}`, caFile);
  }
  const serving = await issueCertificate(ca, {
    commonName: "localhost",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1", "::1"],
    usage: "server",
    validityDays: 30,
  });
  return { certPem: `${serving.certPem.trimEnd()}\n${ca.certPem.trimEnd()}\n`, keyPem: serving.keyPem, caPem: ca.certPem, caFile };
}

const weekMs = 7 * 24 * 3600 * 1000;

/** The CA kept in these files, when both are there, belong together and have a week left. */
function keptAuthority(caFile: string, keyFile: string): { certPem: string; keyPem: string } | undefined {
  try {
    const certPem = readFileSync(caFile, "utf8");
    const keyPem = readFileSync(keyFile, "utf8");
    const certificate = new X509Certificate(certPem);
    if (!certificate.ca || Date.parse(certificate.validTo) - Date.now() < weekMs) return undefined;
    if (!certificate.checkPrivateKey(createPrivateKey(keyPem))) return undefined;
    return { certPem, keyPem };
  } catch {
    return undefined;
  }
}
