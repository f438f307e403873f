import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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

/** A throwaway CA and a serving certificate for the loopback names, made at each start. */
export async function generateServingCertificate(dir = join(cacheDir(), "local-host")): Promise<ServingCertificate> {
  // The X.509 library is loaded only by a host that makes its own certificate.
  const { createCertificateAuthority, issueCertificate } = await import("../controlplane/pki.js");
  const ca = await createCertificateAuthority("gmsa-admission local host CA");
  const serving = await issueCertificate(ca, {
    commonName: "localhost",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1", "::1"],
    usage: "server",
    validityDays: 30,
  });
  mkdirSync(dir, { recursive: true });
  const caFile = join(dir, "ca.crt");
  writeFileSync(caFile, ca.certPem);
  return { certPem: `${serving.certPem.trimEnd()}\n${ca.certPem.trimEnd()}\n`, keyPem: serving.keyPem, caPem: ca.certPem, caFile };
}
