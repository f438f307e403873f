import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createCertificateAuthority } from "../../../controlplane/pki.js";
import { caBundleDaysLeft } from "../../../lib/canary/webhookCa.js";

const Ca = suite("caBundleDaysLeft: when the API server stops trusting the webhooks' endpoint");

const bundle = (...pems: string[]) => Buffer.from(pems.join("")).toString("base64");
const configuration = (...caBundles: Array<string | undefined>) => ({
  webhooks: caBundles.map((caBundle) => ({ name: "w", clientConfig: caBundle === undefined ? { url: "https://function.example" } : { service: { name: "relay" }, caBundle } })),
});

Ca("the newest certificate of a bundle counts (a rotation holds the old CA beside the new), and the soonest bundle of the webhooks", async () => {
  const old = await createCertificateAuthority("old relay CA", { validityDays: 10 });
  const renewed = await createCertificateAuthority("new relay CA", { validityDays: 400 });
  const other = await createCertificateAuthority("another CA", { validityDays: 90 });
  const now = Date.now();
  const rotating = caBundleDaysLeft(configuration(bundle(old.certPem, renewed.certPem)), now)!;
  assert.ok(rotating >= 398 && rotating <= 400, String(rotating));
  const soonest = caBundleDaysLeft(configuration(bundle(old.certPem, renewed.certPem), bundle(other.certPem)), now)!;
  assert.ok(soonest >= 88 && soonest <= 90, String(soonest));
  const expired = caBundleDaysLeft(configuration(bundle(old.certPem)), now + 20 * 24 * 3600 * 1000)!;
  assert.ok(expired < 0, "past expiry: negative");
});

Ca("no bundle (a publicly trusted URL), a bundle that holds no certificate, or no configuration: not known", () => {
  assert.is(caBundleDaysLeft(configuration(undefined)), undefined);
  assert.is(caBundleDaysLeft(configuration(bundle("not a certificate"))), undefined);
  assert.is(caBundleDaysLeft(configuration(bundle("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))), undefined);
  assert.is(caBundleDaysLeft({ kind: "Status" }), undefined);
});

Ca.run();
