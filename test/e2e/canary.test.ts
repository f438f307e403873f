import { suite } from "uvu";
import canaryLog from "../../lib/observability/canary-log.json";
import * as assert from "uvu/assert";
import { runCanary, type CanaryLine } from "../../lib/app/canary.js";
import { admissionRuntime } from "../../lib/app/runtime.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { startLocalWebhook } from "../support/localWebhook.js";

/**
 * The function's canary through a real API server, with the function's own identity and the grant
 * the wiring renders: a dry-run GMSA pod in the canary's namespace, which the API server sends
 * through the wiring to the webhooks. Ready when every hop works; each broken hop named.
 */
const Canary = suite<{ cluster: E2eCluster }>("the canary through a real API server");

Canary.before(async (context) => {
  context.cluster = await startE2eCluster();
});

Canary.after(async ({ cluster }) => {
  await cluster?.close();
});

async function canaryOnce(): Promise<CanaryLine> {
  const lines = await runCanary(await admissionRuntime());
  assert.is(lines.length, 1, JSON.stringify(lines));
  assert.is(lines[0]!.cluster, "default");
  // What the monitoring's canary queries read (infra/modules/admission-monitoring.bicep).
  assert.equal(Object.keys(lines[0]!).sort(), Object.values(canaryLog.fields).sort());
  return lines[0]!;
}

Canary("everything up: ready, with nothing stored in the canary's namespace", async ({ cluster }) => {
  const line = await canaryOnce();
  assert.is(line.outcome, canaryLog.ready, `${line.summary}\n${line.detail}`);
  assert.is(line.event, canaryLog.event);
  assert.ok(line.latencyMs >= 0);
  // Read with the function's own identity, through the grant the wiring renders: the local host's CA.
  assert.ok(typeof line.caBundleDaysLeft === "number" && line.caBundleDaysLeft > 0, `caBundleDaysLeft ${line.caBundleDaysLeft}`);
  const pods = await kubeRequest(cluster.admin, "GET", "/api/v1/namespaces/gmsa-admission-canary/pods");
  assert.equal(pods.body.items, [], "a dry run stores nothing");
  // The webhook's lines for it say dry run, so that the business charts leave them out.
  const canaryLines = cluster.webhook.logs.filter((entry) => entry.includes('"namespace":"gmsa-admission-canary"'));
  assert.ok(canaryLines.length >= 1, cluster.webhook.logs.slice(-5).join("\n"));
  assert.ok(
    canaryLines.every((entry) => entry.includes('"dryRun":true')),
    canaryLines.join("\n"),
  );
});

Canary("no pod is ever created in the canary's namespace, whoever asks: only dry runs pass its policy", async ({ cluster }) => {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { generateName: "not-a-dry-run-", namespace: "gmsa-admission-canary" },
    spec: { serviceAccountName: "canary", containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
  // The policy may take a moment to be loaded after the wiring applied it.
  let created = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/gmsa-admission-canary/pods", pod);
  for (const started = Date.now(); created.status === 201 && Date.now() - started < 10_000;) {
    // Not loaded yet: this one slipped through; take it away and ask again.
    await kubeRequest(cluster.admin, "DELETE", `/api/v1/namespaces/gmsa-admission-canary/pods/${created.body.metadata.name}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
    created = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/gmsa-admission-canary/pods", pod);
  }
  assert.is(created.status, 422, JSON.stringify(created.body));
  assert.match(created.body.message, /only dry runs of pods are allowed in gmsa-admission-canary/);
  const privileged = { ...pod, spec: { ...pod.spec, hostNetwork: true } };
  const dry = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/gmsa-admission-canary/pods?dryRun=All", privileged);
  assert.is(dry.status, 403, "Pod Security's baseline refuses a privileged pod even as a dry run");
  assert.is((await canaryOnce()).outcome, "ready");
});

Canary("the function's endpoint down: the API server could not call the webhook", async ({ cluster }) => {
  const tls = cluster.webhook.tls;
  await cluster.webhook.server.close();
  try {
    const line = await canaryOnce();
    assert.is(line.outcome, "apiServerToWebhook", `${line.summary}\n${line.detail}`);
    assert.match(line.summary, /cannot be reached from the API server/, line.detail);
  } finally {
    await cluster.webhook.close();
    cluster.webhook = await startLocalWebhook(cluster.webhookEnv, { port: cluster.webhookPort, tls });
  }
  assert.is((await canaryOnce()).outcome, "ready");
});

Canary("the webhook configuration pointing at the wrong URL: named, with the API server's words", async ({ cluster }) => {
  const path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission";
  const stored = await kubeRequest(cluster.admin, "GET", path);
  const webhooks = stored.body.webhooks.map((webhook: { clientConfig: { url: string } }) => ({
    ...webhook,
    clientConfig: { ...webhook.clientConfig, url: webhook.clientConfig.url.replace(/\/mutate$/, "/no-such-function") },
  }));
  assert.is((await kubeRequest(cluster.admin, "PATCH", path, { webhooks }, "application/merge-patch+json")).status, 200);
  try {
    const line = await canaryOnce();
    assert.is(line.outcome, "apiServerToWebhook", `${line.summary}\n${line.detail}`);
    assert.match(line.summary, /nothing answers at the webhook's path/, line.detail);
    assert.match(line.detail, /failed calling webhook "mutate\.gmsa-admission\.windows\.k8s\.io"/);
  } finally {
    await kubeRequest(cluster.admin, "PATCH", path, { webhooks: stored.body.webhooks }, "application/merge-patch+json");
  }
  assert.is((await canaryOnce()).outcome, "ready");
});

Canary("the canary's grant missing: the function says it may not ask, and what to do", async ({ cluster }) => {
  const binding = "/apis/rbac.authorization.k8s.io/v1/namespaces/gmsa-admission-canary/rolebindings/gmsa-admission-canary";
  const stored = await kubeRequest(cluster.admin, "GET", binding);
  assert.is((await kubeRequest(cluster.admin, "DELETE", binding)).status, 200);
  try {
    // The API server's RBAC authorizer learns of the deletion from its own watch: a moment later.
    let line = await canaryOnce();
    for (const deadline = Date.now() + 10_000; line.outcome === "ready" && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      line = await canaryOnce();
    }
    assert.is(line.outcome, "checkInput", `${line.summary}\n${line.detail}`);
    assert.match(line.summary, /may not ask for dry runs in namespace gmsa-admission-canary: wire the cluster again/);
  } finally {
    const { metadata, roleRef, subjects } = stored.body;
    await cluster.apply([{ apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: metadata.name, namespace: metadata.namespace }, roleRef, subjects }]);
  }
});

Canary.run();
