import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createCertificateAuthority } from "../../controlplane/pki.js";
import { generateServingCertificate } from "../../host/servingCertificate.js";

/** The local host's certificate: every start is verified by the one CA bundle it printed. */
const Serving = suite("the local host's serving certificate");

function leaf(certPem: string): X509Certificate {
  return new X509Certificate(certPem.split(/(?<=-----END CERTIFICATE-----)\n/)[0]!);
}

Serving("a second start keeps the CA: the bundle a first start printed verifies the second's certificate", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-serving-"));
  const first = await generateServingCertificate(dir);
  const second = await generateServingCertificate(dir);
  assert.is(second.caPem, first.caPem);
  assert.is(readFileSync(first.caFile!, "utf8"), first.caPem, "the printed bundle is unchanged");
  const ca = new X509Certificate(first.caPem);
  assert.ok(leaf(first.certPem).verify(ca.publicKey) && leaf(second.certPem).verify(ca.publicKey));
  assert.is.not(leaf(second.certPem).serialNumber, leaf(first.certPem).serialNumber, "a fresh serving certificate each start");
  assert.is(statSync(join(dir, "ca.key")).mode & 0o777, 0o600, "the CA key is the owner's alone");
});

Serving("a CA near its end, or whose key does not match, is replaced", async () => {
  for (const spoil of ["expiring", "other key"] as const) {
    const dir = mkdtempSync(join(tmpdir(), "gmsa-serving-"));
    const kept = await createCertificateAuthority("kept", { validityDays: spoil === "expiring" ? 2 : 365 });
    const other = await createCertificateAuthority("other");
    writeFileSync(join(dir, "ca.crt"), kept.certPem);
    writeFileSync(join(dir, "ca.key"), spoil === "other key" ? other.keyPem : kept.keyPem);
    const made = await generateServingCertificate(dir);
    assert.is.not(made.caPem, kept.certPem, spoil);
    assert.ok(leaf(made.certPem).verify(new X509Certificate(made.caPem).publicKey), spoil);
  }
});

Serving.run();
