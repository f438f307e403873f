/**
 * Small PKI helpers for local TLS: a throw-away certificate authority and
 * leaf certificates it signs (server or client), all ECDSA P-256 / SHA-256,
 * returned as PEM. Used by the local control plane (controlplane/start.ts) and
 * reusable for anything else that needs a local TLS identity (e.g. a webhook
 * server whose CA goes into a webhook configuration's caBundle).
 */
import { generateKeyPairSync, webcrypto } from "node:crypto";
import { isIP } from "node:net";
import * as x509 from "@peculiar/x509";

const cryptoImpl = webcrypto;
x509.cryptoProvider.set(cryptoImpl);

const KEY_ALGORITHM: webcrypto.EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING_ALGORITHM: webcrypto.EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
const DAY_MS = 24 * 60 * 60 * 1000;
/** Backdate notBefore a little so small clock differences do not matter. */
const BACKDATE_MS = 60 * 60 * 1000;

export interface CertificateAuthority {
  /** PEM certificate of the CA (what clients trust; e.g. a caBundle). */
  certPem: string;
  /** PEM (PKCS#8) private key of the CA. */
  keyPem: string;
}

export interface IssuedCertificate {
  /** PEM certificate, signed by the CA. */
  certPem: string;
  /** PEM (PKCS#8) private key matching the certificate. */
  keyPem: string;
}

export interface IssueOptions {
  commonName: string;
  /** Subject O= values; for Kubernetes client certs these are the user's groups. */
  organizations?: string[];
  /** DNS subject alternative names (server certificates). */
  dnsNames?: string[];
  /** IP subject alternative names, IPv4 or IPv6 (server certificates). */
  ipAddresses?: string[];
  /** 'server' gives extKeyUsage serverAuth, 'client' gives clientAuth. */
  usage: "server" | "client";
  /** Validity in days from now; default 365. */
  validityDays?: number;
}

export interface KeyPairPem {
  /** PEM (PKCS#8) private key. */
  privateKeyPem: string;
  /** PEM (SPKI) public key. */
  publicKeyPem: string;
}

function subjectName(commonName: string, organizations: string[] = []): x509.JsonName {
  // JSON form: one RDN per entry, so values need no escaping.
  const name: x509.JsonName = organizations.map((o) => ({ O: [o] }));
  name.push({ CN: [commonName] });
  return name;
}

function randomSerial(): string {
  const bytes = cryptoImpl.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // keep it positive
  if (bytes[0] === 0) bytes[0] = 1;
  return Buffer.from(bytes).toString("hex");
}

function validity(days: number): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: new Date(now - BACKDATE_MS), notAfter: new Date(now + days * DAY_MS) };
}

async function exportPrivateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await cryptoImpl.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return cryptoImpl.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"]);
}

/** Creates a self-signed CA certificate and key (valid for `validityDays`, default 3650). */
export async function createCertificateAuthority(commonName: string, opts: { validityDays?: number } = {}): Promise<CertificateAuthority> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: subjectName(commonName),
    ...validity(opts.validityDays ?? 3650),
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem"), keyPem: await exportPrivateKeyPem(keys.privateKey) };
}

/** Issues a leaf certificate (server or client) signed by `ca`, with a new key. */
export async function issueCertificate(ca: CertificateAuthority, opts: IssueOptions): Promise<IssuedCertificate> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await cryptoImpl.subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(ca.keyPem), KEY_ALGORITHM, false, ["sign"]);
  const keys = await generateKeys();

  const altNames: x509.JsonGeneralName[] = [];
  for (const dns of opts.dnsNames ?? []) altNames.push({ type: "dns", value: dns });
  for (const ip of opts.ipAddresses ?? []) {
    if (isIP(ip) === 0) throw new Error(`issueCertificate: not an IP address: ${ip}`);
    altNames.push({ type: "ip", value: ip });
  }

  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([opts.usage === "server" ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth], false),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
  ];
  if (altNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));

  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: subjectName(opts.commonName, opts.organizations),
    issuer: caCert.subjectName,
    ...validity(opts.validityDays ?? 365),
    signingAlgorithm: SIGNING_ALGORITHM,
    publicKey: keys.publicKey,
    signingKey: caKey,
    extensions,
  });
  return { certPem: cert.toString("pem"), keyPem: await exportPrivateKeyPem(keys.privateKey) };
}

/** A bare ECDSA P-256 key pair in PEM, e.g. for signing service-account tokens. */
export function generateKeyPairPem(): KeyPairPem {
  const { privateKey, publicKey } = generateKeyPairSync("ec", {
    namedCurve: "prime256v1",
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}
