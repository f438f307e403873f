import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { checkReadiness, safetyNetState } from "../../cluster/readiness.js";
import { runWire } from "../../cluster/wire.js";
import { localWebhookUser } from "../../host/localCluster.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { writeKubeconfig } from "../support/kubeconfigs.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { startLocalWebhook } from "../support/localWebhook.js";

/**
 * The deploy's readiness check (`npm run wire -- --check`) against a real API server wired to the
 * local host as the function (url wiring; the relay suite checks the relay's path): ready when
 * every hop works, and each broken hop named.
 */
const Readiness = suite<{ cluster: E2eCluster }>("the readiness check through a real API server");

Readiness.before(async (context) => {
  context.cluster = await startE2eCluster({ safetyNet: true });
});

Readiness.after(async ({ cluster }) => {
  await cluster?.close();
});

async function wireCheck(cluster: E2eCluster, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runWire(["--check", "--check-timeout-seconds", "0", ...args], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    kubeConfig: () => cluster.admin,
    env: {},
  });
  return { code, stdout, stderr };
}

/** Serves the function again on the wired port, against another API server address or identity. */
async function restartFunction(cluster: E2eCluster, env: Record<string, string>): Promise<void> {
  const tls = cluster.webhook.tls;
  await cluster.webhook.close();
  cluster.webhook = await startLocalWebhook({ ...cluster.webhookEnv, ...env }, { port: cluster.webhookPort, tls });
}

Readiness("every hop works: the webhooks refuse the dry-run pod as they must, and nothing is created", async ({ cluster }) => {
  const result = await checkReadiness(cluster.admin);
  assert.is(result.hop, "ready", `${result.summary}\n${result.detail}`);
  const run = await wireCheck(cluster, []);
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stdout, /^check: ready: the API server called the webhooks through the wiring/);
  const pods = await kubeRequest(cluster.admin, "GET", "/api/v1/namespaces/default/pods?labelSelector=app.kubernetes.io%2Fname%3Dgmsa-admission-readiness");
  assert.equal(pods.body.items, [], "the dry run stored nothing");
});

Readiness("wiring and checking in one command, as the deploy script runs it: applied, then ready", async ({ cluster }) => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-readiness-"));
  const caFile = join(dir, "ca.crt");
  writeFileSync(caFile, cluster.webhook.caPem);
  let stdout = "";
  let stderr = "";
  const code = await runWire(
    [
      "--function-url",
      cluster.webhook.server.url,
      "--mode",
      "url",
      "--identity",
      localWebhookUser,
      "--ca-bundle-file",
      caFile,
      "--apply",
      "--check",
      "--check-timeout-seconds",
      "30",
    ],
    { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text), kubeConfig: () => cluster.admin, env: {} },
  );
  assert.is(code, 0, stderr);
  assert.match(stdout, /MutatingWebhookConfiguration\/gmsa-admission: applied\n/);
  assert.match(stdout, /check: ready: the API server called the webhooks through the wiring/);
  assert.ok(stdout.indexOf("applied") < stdout.indexOf("check: ready"), "checked once applied");
  assert.match(stdout, /check: the in-cluster safety net is installed/);
  // Taken away, the check says so and still passes: a cluster may be wired without it.
  const binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/gmsa-admission-pods";
  const stored = await kubeRequest(cluster.admin, "GET", binding);
  assert.is((await kubeRequest(cluster.admin, "DELETE", binding)).status, 200);
  try {
    assert.match(await safetyNetState(cluster.admin), /NOT installed \(missing: ValidatingAdmissionPolicyBinding gmsa-admission-pods\)/);
  } finally {
    const { metadata, spec } = stored.body;
    await kubeRequest(cluster.admin, "POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: metadata.name, labels: metadata.labels },
      spec,
    });
  }
});

Readiness("the function cannot reach the API server: named, exit 1", async ({ cluster }) => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-readiness-"));
  // The right CA and token, an address where nothing listens.
  const unreachable = writeKubeconfig(join(dir, "kubeconfig"), { server: "https://127.0.0.1:1", caPem: cluster.local.controlPlane.caPem, token: "unused" });
  await restartFunction(cluster, { KUBECONFIG: unreachable, GMSA_ADMISSION_BUDGET_MS: "1500", GMSA_API_TIMEOUT_MS: "500" });
  try {
    const run = await wireCheck(cluster, []);
    assert.is(run.code, 1);
    assert.match(run.stderr, /^check: NOT READY \(functionToApiServer\): the API server reached the function, but the function could not reach the API server/);
    assert.match(
      run.stderr,
      /check: the API server answered HTTP 5\d\d: admission webhook "mutate\.gmsa-admission\.windows\.k8s\.io" denied the request: GMSA admission could not be checked/,
    );
  } finally {
    await restartFunction(cluster, {});
  }
});

Readiness("the function's identity is refused by the API server: named", async ({ cluster }) => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-readiness-"));
  const refused = writeKubeconfig(join(dir, "kubeconfig"), {
    server: cluster.local.controlPlane.server,
    caPem: cluster.local.controlPlane.caPem,
    token: "not-a-token-this-cluster-knows",
  });
  await restartFunction(cluster, { KUBECONFIG: refused });
  try {
    const result = await checkReadiness(cluster.admin);
    assert.is(result.hop, "functionIdentity", `${result.summary}\n${result.detail}`);
  } finally {
    await restartFunction(cluster, {});
  }
});

Readiness("the API server cannot call the function: named, with the API server's own words", async ({ cluster }) => {
  const tls = cluster.webhook.tls;
  await cluster.webhook.close();
  try {
    const result = await checkReadiness(cluster.admin);
    assert.is(result.hop, "apiServerToWebhook", `${result.summary}\n${result.detail}`);
    assert.match(result.summary, /cannot be reached from the API server/, result.detail);
    assert.match(result.detail, /failed calling webhook/);
  } finally {
    cluster.webhook = await startLocalWebhook(cluster.webhookEnv, { port: cluster.webhookPort, tls });
  }
  assert.is((await checkReadiness(cluster.admin)).hop, "ready");
});

Readiness("webhooks that do not run (the namespace opted out) are named: the pod would have been admitted unchecked", async ({ cluster }) => {
  await cluster.apply([{ apiVersion: "v1", kind: "Namespace", metadata: { name: "opted-out", labels: { "windows.k8s.io/disabled": "true" } } }]);
  await cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: "opted-out" } }]);
  const run = await wireCheck(cluster, ["--check-namespace", "opted-out"]);
  assert.is(run.code, 1);
  assert.match(run.stderr, /NOT READY \(webhooksDidNotRun\): the API server admitted a pod naming a credential spec nobody may use/);
});

Readiness("the mutating webhook gone or set to Ignore: not ready, though the validating one refused as it must", async ({ cluster }) => {
  const path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gmsa-admission";
  const stored = await kubeRequest(cluster.admin, "GET", path);
  const ignoring = stored.body.webhooks.map((webhook: Record<string, unknown>) => ({ ...webhook, failurePolicy: "Ignore" }));
  assert.is((await kubeRequest(cluster.admin, "PATCH", path, { webhooks: ignoring }, "application/merge-patch+json")).status, 200);
  try {
    const ignored = await checkReadiness(cluster.admin);
    assert.is(ignored.hop, "webhooksDidNotRun", ignored.summary);
    assert.match(ignored.summary, /mutate\.gmsa-admission\.windows\.k8s\.io has failurePolicy Ignore/);
    assert.is((await kubeRequest(cluster.admin, "DELETE", path)).status, 200);
    const missing = await checkReadiness(cluster.admin);
    assert.match(missing.summary, /the MutatingWebhookConfiguration gmsa-admission is missing/);
  } finally {
    const { metadata, webhooks } = stored.body;
    await cluster.apply([
      {
        apiVersion: "admissionregistration.k8s.io/v1",
        kind: "MutatingWebhookConfiguration",
        metadata: { name: metadata.name, labels: metadata.labels, annotations: metadata.annotations },
        webhooks,
      },
    ]);
  }
  assert.is((await checkReadiness(cluster.admin)).hop, "ready");
});

Readiness("a namespace that does not exist is said at once, not asked about for minutes", async ({ cluster }) => {
  let stderr = "";
  const started = Date.now();
  const code = await runWire(["--check", "--check-namespace", "nope"], { stdout: () => {}, stderr: (text) => (stderr += text), kubeConfig: () => cluster.admin, env: {} });
  assert.is(code, 1);
  assert.match(stderr, /NOT READY \(checkInput\): the check's namespace does not exist/);
  assert.ok(Date.now() - started < 10_000, `${Date.now() - started} ms`);
});

Readiness.run();
