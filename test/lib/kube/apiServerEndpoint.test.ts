import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createCertificateAuthority } from "../../../controlplane/pki.js";
import { ApiServerEndpointError, apiServerUrl, caBundlePem } from "../../../lib/kube/apiServerEndpoint.js";

const Url = suite("API server URL");

Url("an https URL is kept, without a trailing slash", () => {
  assert.is(apiServerUrl("https://aks-one-dns-abc.hcp.westeurope.azmk8s.io:443/", "GMSA_API_SERVER_URL"), "https://aks-one-dns-abc.hcp.westeurope.azmk8s.io");
  assert.is(apiServerUrl(" https://127.0.0.1:6443 ", "GMSA_API_SERVER_URL"), "https://127.0.0.1:6443");
});

const refusedUrls: Array<[string, string]> = [
  ["http://aks.example:443", "must be https, not http"],
  ["aks.example", "is not a URL"],
  ["https://user:secret@aks.example", "must not carry credentials"],
  ["https://aks.example/?x=1", "no query or fragment"],
];
for (const [value, problem] of refusedUrls) {
  Url(`refuses ${value}: ${problem}`, () => {
    try {
      apiServerUrl(value, "GMSA_API_SERVER_URL");
      assert.unreachable("should have been refused");
    } catch (error) {
      assert.instance(error, ApiServerEndpointError);
      assert.match((error as Error).message, "GMSA_API_SERVER_URL: ");
      assert.match((error as Error).message, problem);
      assert.not.match((error as Error).message, "secret");
    }
  });
}

Url.run();

const Ca = suite<{ one: string; two: string }>("API server CA");

Ca.before(async (context) => {
  try {
    context.one = (await createCertificateAuthority("ca-one")).certPem;
    context.two = (await createCertificateAuthority("ca-two")).certPem;
  } catch (error) {
    console.error("API server CA: setup failed", error);
    throw error;
  }
});

Ca("PEM is accepted as it is", ({ one }) => {
  assert.is(caBundlePem(one, "GMSA_API_SERVER_CA").trim(), one.trim());
});

Ca("base64 of PEM (certificate-authority-data) is accepted, line breaks and all", ({ one }) => {
  const base64 = Buffer.from(one)
    .toString("base64")
    .replace(/(.{64})/g, "$1\n");
  assert.is(caBundlePem(base64, "GMSA_API_SERVER_CA").trim(), one.trim());
});

Ca("a bundle of two CAs (a rotation) keeps both", ({ one, two }) => {
  const bundle = caBundlePem(Buffer.from(`${one}${two}`).toString("base64"), "GMSA_API_SERVER_CA");
  assert.is(bundle.match(/BEGIN CERTIFICATE/g)?.length, 2);
});

Ca("refuses text that holds no certificate", () => {
  assert.throws(() => caBundlePem("not a certificate", "GMSA_API_SERVER_CA"), /GMSA_API_SERVER_CA: the CA is neither PEM nor base64 of PEM/);
});

Ca("refuses a certificate block that does not parse, saying which one", ({ one }) => {
  const broken = `${one}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`;
  assert.throws(() => caBundlePem(broken, "GMSA_API_SERVER_CA"), /certificate 2 of the CA bundle does not parse/);
});

Ca.run();
