import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { loadKubeconfigFile, startLocalCluster, wireLocalCluster, type LocalCluster } from "../../host/localCluster.js";
import { generateServingCertificate } from "../../host/servingCertificate.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { gmsa } from "../support/reviews.js";

/**
 * Attack review, url wiring: the member's secret is a segment of the webhook URL. Whenever the
 * API server cannot get an answer (the app cold-starting past the timeout, an instance restart,
 * a network blip), it refuses the pod with an error that quotes the webhook URL: every pod
 * creator of that cluster is shown the member's secret. FAILS while the secret is shown.
 */
const Leak = suite<{ local: LocalCluster }>("attack: a url-wired member's secret in the API server's errors");

const secret = randomBytes(32).toString("base64url");
const ns = "apps";

Leak.before(async (context) => {
  context.local = await startLocalCluster({ users: [{ name: "dev", groups: [] }], log: () => {} });
});

Leak.after(async (context) => {
  await context.local?.stop().catch(() => {});
});

Leak("a pod creator refused because the webhook did not answer is not shown the cluster secret", async ({ local }) => {
  // A port nothing listens on: the function app is down or cold-starting.
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port: p } = probe.address() as { port: number };
      probe.close(() => resolve(p));
    });
  });
  const tls = await generateServingCertificate(mkdtempSync(join(tmpdir(), "gmsa-attack-")));
  await wireLocalCluster(local, { url: `https://127.0.0.1:${port}/clusters/alpha/${secret}`, caPem: tls.caPem, authorizeRequestingUser: false });
  const admin = loadKubeconfigFile(local.adminKubeconfig);
  await applyObjects(admin, [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "dev-edit", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "edit" }, subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "dev" }] },
  ]);
  const dev = loadKubeconfigFile(local.userKubeconfigs.dev!);
  const reply = await kubeRequest(dev, "POST", `/api/v1/namespaces/${ns}/pods`, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "webapp" },
    spec: { securityContext: gmsa("webapp1-credspec"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  });
  const message = typeof reply.body === "object" ? String(reply.body?.message) : String(reply.body);
  console.log(`    dev was answered ${reply.status}: ${message.replace(secret, "<SECRET>")}`);
  assert.ok(reply.status >= 400, "the pod should be refused (failurePolicy Fail)");
  assert.not.ok(message.includes(secret), "the pod creator was shown alpha's cluster secret");
});

Leak("whoever may only read events in the namespace is not shown the cluster secret either", async ({ local }) => {
  const admin = loadKubeconfigFile(local.adminKubeconfig);
  await applyObjects(admin, [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "auditor", namespace: ns } },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "auditor-view", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" }, subjects: [{ kind: "ServiceAccount", name: "auditor", namespace: ns }] },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "webapp", namespace: ns },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "webapp" } },
        template: { metadata: { labels: { app: "webapp" } }, spec: { securityContext: gmsa("webapp1-credspec"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] } },
      },
    },
  ]);
  // The ReplicaSet controller's pod creations fail at the webhook and are recorded as events.
  const deadline = Date.now() + 30_000;
  let messages: string[] = [];
  while (Date.now() < deadline) {
    const reply = await kubeRequest(admin, "GET", `/api/v1/namespaces/${ns}/events`);
    messages = ((reply.body?.items ?? []) as Array<{ reason?: string; message?: string }>).filter((e) => e.reason === "FailedCreate").map((e) => e.message ?? "");
    if (messages.length > 0) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.ok(messages.length > 0, "no FailedCreate event: the test proves nothing");
  // The view role may read events: anyone holding it reads what the event says.
  const canView = await kubeRequest(admin, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
    spec: { user: `system:serviceaccount:${ns}:auditor`, resourceAttributes: { namespace: ns, verb: "list", resource: "events" } },
  });
  console.log(`    FailedCreate event (auditor may list events: ${canView.body?.status?.allowed}): ${messages[0]!.replace(secret, "<SECRET>").slice(0, 240)}`);
  assert.not.ok(messages.some((m) => m.includes(secret)), "the namespace's events carry alpha's cluster secret");
});

Leak.run();
