import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { createCertificateAuthority, issueCertificate } from "../../controlplane/pki.js";
import { credSpecFixture } from "../support/fixtures.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { gmsa } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * docs/migrating.md's order, on a real API server: this product is wired while another gMSA
 * webhook (a stand-in that behaves as the upstream one: it inlines the named spec's contents as
 * its own JSON when none are set, and refuses contents that differ from the spec) is still in
 * place, called before this one and after it; then the other is removed. At every step a pod whose
 * service account may use the spec is admitted with its contents, and one that may not is refused:
 * there is no window where GMSA pods go unchecked, and the two never refuse each other's work.
 */
interface Context {
  cluster: E2eCluster;
  other: Server;
  caPem: string;
  port: number;
}

const Migration = suite<Context>("moving from another gMSA webhook");

const spec = credSpecFixture("webapp1-credspec");

Migration.before(async (context) => {
  context.cluster = await startE2eCluster();
  const ca = await createCertificateAuthority("stand-in gMSA webhook CA");
  const serving = await issueCertificate(ca, { commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"], usage: "server" });
  context.caPem = ca.certPem;
  context.other = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const review = JSON.parse(Buffer.concat(chunks).toString()) as {
        request: { uid: string; object: { spec: { securityContext?: { windowsOptions?: Record<string, string> } } } };
      };
      const options = review.request.object.spec.securityContext?.windowsOptions;
      // Its own JSON of the spec: key order as stored, no canonical form.
      const contents = JSON.stringify(spec.credspec);
      let response: Record<string, unknown> = { uid: review.request.uid, allowed: true };
      if (req.url?.startsWith("/mutate") && options?.gmsaCredentialSpecName && options.gmsaCredentialSpec === undefined) {
        const patch = [{ op: "add", path: "/spec/securityContext/windowsOptions/gmsaCredentialSpec", value: contents }];
        response = { ...response, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(patch)).toString("base64") };
      }
      if (req.url?.startsWith("/validate") && options?.gmsaCredentialSpec !== undefined) {
        const equal =
          JSON.stringify(JSON.parse(options.gmsaCredentialSpec)) === JSON.stringify(JSON.parse(contents)) || sameJson(JSON.parse(options.gmsaCredentialSpec), spec.credspec);
        if (!equal) response = { uid: review.request.uid, allowed: false, status: { code: 422, message: "stand-in: the contents do not match the spec" } };
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response }));
    });
  });
  await new Promise<void>((resolve) => context.other.listen(0, "127.0.0.1", resolve));
  context.port = (context.other.address() as AddressInfo).port;
  await context.cluster.apply([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "moving" } },
    ...["web", "nobody"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "moving" } })),
    { ...spec, metadata: { name: "webapp1-credspec" } } as never,
    ...useGrant({ name: "web-uses-webapp1", namespace: "moving", serviceAccount: "web", credSpecs: ["webapp1-credspec"] }),
  ]);
});

Migration.after(async ({ cluster, other }) => {
  other?.close();
  await cluster?.close();
});

function sameJson(a: unknown, b: unknown): boolean {
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]));
}

/** The other webhook's configurations, named so that the API server calls them before or after this product's ("gmsa-admission"). */
function otherConfigurations(name: string, context: Context) {
  const webhook = (path: string) => ({
    name: `${path.slice(1)}.stand-in.windows-gmsa.test`,
    clientConfig: { url: `https://127.0.0.1:${context.port}${path}`, caBundle: Buffer.from(context.caPem).toString("base64") },
    rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
    failurePolicy: "Fail",
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
  });
  return [
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name }, webhooks: [webhook("/mutate")] },
    { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name }, webhooks: [webhook("/validate")] },
  ];
}

async function removeOther(context: Context, name: string): Promise<void> {
  for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
    await kubeRequest(context.cluster.admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/${kind}/${name}`);
  }
}

/** A pod of `account` naming the spec, dry run: its answer and the contents it would carry. */
async function admit(context: Context, account: string): Promise<{ status: number; contents?: string; message?: string }> {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { generateName: `${account}-`, namespace: "moving" },
    spec: { serviceAccountName: account, securityContext: gmsa("webapp1-credspec"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
  const reply = await kubeRequest(context.cluster.admin, "POST", "/api/v1/namespaces/moving/pods?dryRun=All", pod);
  return { status: reply.status, contents: reply.body?.spec?.securityContext?.windowsOptions?.gmsaCredentialSpec, message: reply.body?.message };
}

for (const [order, name] of [
  ["before", "aaa-gmsa-webhook"],
  ["after", "zzz-gmsa-webhook"],
] as const) {
  Migration(`with the other webhook called ${order} this one: pods with use admitted with the spec's contents, pods without refused; then the other removed`, async (context) => {
    await context.cluster.apply(otherConfigurations(name, context) as never);
    try {
      const allowed = await admit(context, "web");
      assert.is(allowed.status, 201, allowed.message);
      assert.ok(allowed.contents !== undefined && sameJson(JSON.parse(allowed.contents), spec.credspec), "the contents are the spec's, whoever inlined them");
      const refused = await admit(context, "nobody");
      assert.is(refused.status, 403, refused.message);
      assert.match(refused.message ?? "", /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
    } finally {
      await removeOther(context, name);
    }
    // The other gone: this one alone, the same answers.
    assert.is((await admit(context, "web")).status, 201);
    assert.is((await admit(context, "nobody")).status, 403);
  });
}

Migration.run();
