/**
 * Starts the real local control plane (etcd + kube-apiserver +
 * kube-controller-manager) and talks to it with @kubernetes/client-node.
 * The first run builds the binaries (many minutes); later runs take seconds.
 */
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { existsSync } from "node:fs";
import * as k8s from "@kubernetes/client-node";
import { startControlPlane, type ControlPlane } from "../../controlplane/start";

const ALICE_TOKEN = "alice-token-0123456789";

const test = suite<{ cp?: ControlPlane }>("controlplane");

function adminConfig(cp: ControlPlane): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  return kc;
}

function tokenConfig(cp: ControlPlane, token: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "local", server: cp.server, caData: Buffer.from(cp.caPem).toString("base64") }],
    users: [{ name: "u", token }],
    contexts: [{ name: "c", cluster: "local", user: "u" }],
    currentContext: "c",
  });
  return kc;
}

async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await fn();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}: ${String(last)}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// Started in the first test, not in a before hook: uvu 0.5 silently ignores
// errors thrown by hooks (the run would end "0 / N passed" with exit code 0).
test("starts etcd, kube-apiserver and kube-controller-manager", async (ctx) => {
  ctx.cp = await startControlPlane({
    tokens: [{ token: ALICE_TOKEN, user: "alice", uid: "uid-alice", groups: ["devs"] }],
    log: (line) => process.stderr.write(`  ${line}\n`),
  });
});

test.after(async (ctx) => {
  await ctx.cp?.stop();
});

test("writes an admin kubeconfig and reports the running processes", ({ cp }) => {
  assert.ok(cp);
  assert.match(cp.server, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(cp.kubeconfigPath.startsWith("/") && existsSync(cp.kubeconfigPath));
  assert.match(cp.caPem, /BEGIN CERTIFICATE/);
  assert.equal(
    cp.processes.map((p) => p.name),
    ["etcd", "kube-apiserver", "kube-controller-manager"],
  );
  for (const p of cp.processes) assert.ok(isAlive(p.pid), `${p.name} is running`);
});

test("admin creates a namespace and a ServiceAccount; the controller manager adds the default SA", async ({ cp }) => {
  assert.ok(cp);
  const core = adminConfig(cp).makeApiClient(k8s.CoreV1Api);
  const ns = await core.createNamespace({ body: { metadata: { name: "cp-test" } } });
  assert.is(ns.metadata?.name, "cp-test");
  const sa = await core.createNamespacedServiceAccount({
    namespace: "cp-test",
    body: { metadata: { name: "webapp" } },
  });
  assert.is(sa.metadata?.namespace, "cp-test");
  const list = await core.listNamespacedServiceAccount({ namespace: "cp-test" });
  assert.ok(list.items.some((s) => s.metadata?.name === "webapp"));
  await eventually("default service account in cp-test", async () => core.readNamespacedServiceAccount({ namespace: "cp-test", name: "default" }));
});

test("a Deployment gets a ReplicaSet (deployment controller runs)", async ({ cp }) => {
  assert.ok(cp);
  const kc = adminConfig(cp);
  const apps = kc.makeApiClient(k8s.AppsV1Api);
  await apps.createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "web" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "web" } },
        template: {
          metadata: { labels: { app: "web" } },
          spec: { containers: [{ name: "web", image: "example.invalid/web:1" }] },
        },
      },
    },
  });
  const rs = await eventually("a ReplicaSet for deployment web", async () => {
    const list = await apps.listNamespacedReplicaSet({ namespace: "default", labelSelector: "app=web" });
    return list.items[0];
  });
  assert.is(rs.metadata?.ownerReferences?.[0]?.name, "web");
});

test("RBAC denies an unprivileged token user from listing pods", async ({ cp }) => {
  assert.ok(cp);
  const alice = tokenConfig(cp, ALICE_TOKEN);
  const review = await alice.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  assert.is(review.status?.userInfo?.username, "alice");
  assert.ok(review.status?.userInfo?.groups?.includes("devs"));

  try {
    await alice.makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: "default" });
    assert.unreachable("alice should not be allowed to list pods");
  } catch (err) {
    assert.instance(err, k8s.ApiException);
    assert.is((err as k8s.ApiException<unknown>).code, 403);
  }

  try {
    await tokenConfig(cp, "wrong-token").makeApiClient(k8s.CoreV1Api).listNamespacedPod({ namespace: "default" });
    assert.unreachable("an unknown token should be rejected");
  } catch (err) {
    assert.instance(err, k8s.ApiException);
    assert.is((err as k8s.ApiException<unknown>).code, 401);
  }
});

test("stop() ends every process and removes the temp data dir", async (ctx) => {
  const cp = ctx.cp;
  assert.ok(cp);
  const pids = cp.processes.map((p) => p.pid);
  await cp.stop();
  ctx.cp = undefined;
  for (const pid of pids) assert.not.ok(isAlive(pid), `pid ${pid} is gone`);
  assert.not.ok(existsSync(cp.dataDir), "data dir removed");
});

test.run();
