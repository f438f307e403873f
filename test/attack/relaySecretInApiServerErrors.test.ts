import { randomBytes } from "node:crypto";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { relayClusterSecretKey } from "../../cluster/relay.js";
import { issueRelayCertificate } from "../../cluster/relayCertificate.js";
import { loadKubeconfigFile, startLocalCluster, type LocalCluster } from "../../host/localCluster.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { gmsa } from "../support/reviews.js";

/**
 * Attack review, the member secret in what the API server tells its users. Whenever a webhook
 * call fails, kube-apiserver refuses the pod with an error that quotes the webhook's URL, and
 * writes the same text into the namespace's FailedCreate events (readable with `view`). In url
 * wiring the member secret is a segment of that URL: the API server shows it, and the product
 * cannot stop it (README, Security; `npm run wire -- --mode url --cluster` warns). What the
 * product controls is the wiring it recommends for members that do not trust each other: relay
 * wiring, whose webhook URLs carry no secret. This runs that wiring, rendered for a member, in a
 * real kube-apiserver whose relay cannot answer (no node runs its pods), and checks that neither
 * the pod creator nor an events reader is shown the secret.
 */
const Leak = suite<{ local: LocalCluster }>("attack: a relay-wired member's secret in the API server's errors");

const secret = randomBytes(32).toString("base64url");
const ns = "apps";

Leak.before(async (context) => {
  try {
    await setUp(context);
  } catch (error) {
    // uvu reports nothing of a failing hook: say what went wrong before it swallows it.
    console.error("set-up failed:", error);
    throw error;
  }
});

async function setUp(context: { local: LocalCluster }): Promise<void> {
  context.local = await startLocalCluster({ users: [{ name: "dev", groups: [] }], log: () => {} });
  const admin = loadKubeconfigFile(context.local.adminKubeconfig);
  const manifests = clusterManifests({
    target: {
      kind: "relay",
      function: { host: "func-gmsa.azurewebsites.net", port: 443 },
      functionKey: randomBytes(24).toString("base64url"),
      certificate: await issueRelayCertificate("gmsa-admission"),
      cluster: { name: "alpha", secret },
    },
    subject: { kind: "User", name: "gmsa-webhook" },
  });
  const isWebhookConfiguration = (object: KubernetesObject) => object.kind.endsWith("WebhookConfiguration");
  // The relay's Secret holds the member secret: it is in play, only not in any URL.
  const held = manifests
    .filter((object) => object.kind === "Secret")
    .map((object): unknown => Reflect.get(Reflect.get(object, "data") ?? {}, relayClusterSecretKey))
    .filter((value): value is string => typeof value === "string");
  assert.ok(held.length === 1 && Buffer.from(held[0]!, "base64").toString().includes(secret), "the rendered relay's Secret carries the member secret");
  assert.not.ok(JSON.stringify(manifests.filter(isWebhookConfiguration)).includes(secret), "the webhook configurations carry no member secret");
  await applyObjects(admin, [
    ...manifests.filter((object) => !isWebhookConfiguration(object)),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "dev-edit", namespace: ns },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "edit" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "dev" }],
    },
    ...manifests.filter(isWebhookConfiguration),
  ]);
}

Leak.after(async (context) => {
  await context.local?.stop().catch(() => {});
});

const windowsSpec = () => ({ securityContext: gmsa("webapp1-credspec"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] });

Leak("a pod creator refused because the relay did not answer is not shown the member secret", async ({ local }) => {
  const dev = loadKubeconfigFile(local.userKubeconfigs.dev!);
  const reply = await kubeRequest(dev, "POST", `/api/v1/namespaces/${ns}/pods`, { apiVersion: "v1", kind: "Pod", metadata: { name: "webapp" }, spec: windowsSpec() });
  const message = typeof reply.body === "object" ? String(reply.body?.message) : String(reply.body);
  console.log(`    dev was answered ${reply.status}: ${message.replace(secret, "<SECRET>").slice(0, 240)}`);
  assert.ok(reply.status >= 400, "the pod should be refused (failurePolicy Fail)");
  assert.match(message, "failed calling webhook", "the refusal is the API server's own, quoting the webhook");
  assert.not.ok(message.includes(secret), "the pod creator was shown alpha's member secret");
});

Leak("whoever may only read events in the namespace is not shown the member secret either", async ({ local }) => {
  const admin = loadKubeconfigFile(local.adminKubeconfig);
  await applyObjects(admin, [
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "webapp", namespace: ns },
      spec: { replicas: 1, selector: { matchLabels: { app: "webapp" } }, template: { metadata: { labels: { app: "webapp" } }, spec: windowsSpec() } },
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
  console.log(`    FailedCreate event: ${messages[0]!.replace(secret, "<SECRET>").slice(0, 240)}`);
  assert.not.ok(
    messages.some((m) => m.includes(secret)),
    "the namespace's events carry alpha's member secret",
  );
});

Leak.run();
