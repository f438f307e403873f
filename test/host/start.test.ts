import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadKubeconfigFile } from "../../host/localCluster.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { exampleObjects } from "../../host/localCluster.js";

/** `npm start` with no KUBECONFIG: a local cluster with the webhook wired in, stopped by Ctrl-C. */
const Start = suite("npm start without KUBECONFIG");

function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms; output:\n${seen}`)), timeoutMs);
    child.stdout!.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const match = seen.split("\n").find((line) => pattern.test(line));
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => (seen += chunk.toString()));
    child.once("exit", (code) => reject(new Error(`exited with ${code} before printing ${pattern}; output:\n${seen}`)));
  });
}

Start("prints an export line whose cluster refuses and expands GMSA pods, and Ctrl-C stops everything", async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0" };
  delete env.KUBECONFIG;
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.GMSA_CLUSTER_ACCESS;
  const child = spawn("tsx", [join(__dirname, "..", "..", "host", "start.ts")], { env, stdio: ["ignore", "pipe", "pipe"] });
  try {
    const line = await waitForLine(child, /^export KUBECONFIG=/, 15 * 60_000);
    const kubeconfig = line.slice("export KUBECONFIG=".length);
    assert.ok(kubeconfig.startsWith("/") && existsSync(kubeconfig), kubeconfig);
    const admin = loadKubeconfigFile(kubeconfig);
    const [pod] = exampleObjects("pod.yaml");
    const created = await kubeRequest(admin, "POST", "/api/v1/namespaces/demo/pods", pod);
    assert.is(created.status, 201, JSON.stringify(created.body));
    assert.match(created.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, /^\{"ActiveDirectoryConfig"/);
    const [refused] = exampleObjects("pod-not-allowed.yaml");
    const denied = await kubeRequest(admin, "POST", "/api/v1/namespaces/demo/pods", refused);
    assert.is(denied.status, 403, JSON.stringify(denied.body));

    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGINT");
    // tsx reports an interrupted program the shell's way (128 + SIGINT).
    const code = await exited;
    assert.ok(code === 0 || code === 130, `exit code ${code}`);
    assert.not.ok(existsSync(kubeconfig), "the local cluster's files are removed");
    const health = await kubeRequest(admin, "GET", "/readyz").catch((error: Error) => error);
    assert.instance(health, Error, "the API server is gone");
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

Start("with GMSA_AUTHORIZE_REQUESTING_USER=true the local cluster lets the webhook ask SubjectAccessReviews: the pod is checked, not failed", async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0", GMSA_AUTHORIZE_REQUESTING_USER: "true" };
  delete env.KUBECONFIG;
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.GMSA_CLUSTER_ACCESS;
  const child = spawn("tsx", [join(__dirname, "..", "..", "host", "start.ts")], { env, stdio: ["ignore", "pipe", "pipe"] });
  try {
    const line = await waitForLine(child, /^export KUBECONFIG=/, 15 * 60_000);
    const admin = loadKubeconfigFile(line.slice("export KUBECONFIG=".length));
    // The cluster's admin may use every spec, as the demo's service account may use this one.
    const [pod] = exampleObjects("pod.yaml");
    const created = await kubeRequest(admin, "POST", "/api/v1/namespaces/demo/pods", pod);
    assert.is(created.status, 201, JSON.stringify(created.body));
    const [refused] = exampleObjects("pod-not-allowed.yaml");
    const denied = await kubeRequest(admin, "POST", "/api/v1/namespaces/demo/pods", refused);
    assert.is(denied.status, 403, JSON.stringify(denied.body));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGINT");
    await exited;
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

Start("runs the canary's timer on its schedule, and with GMSA_AUDIT the audit with its role wired: both see the local cluster", async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0", GMSA_CANARY_SCHEDULE: "*/2 * * * * *", GMSA_AUDIT: "true" };
  delete env.KUBECONFIG;
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.GMSA_CLUSTER_ACCESS;
  const child = spawn("tsx", [join(__dirname, "..", "..", "host", "start.ts")], { env, stdio: ["ignore", "pipe", "pipe"] });
  try {
    const canary = waitForLine(child, /"event":"gmsa\.canary"/, 15 * 60_000);
    const audit = waitForLine(child, /"event":"gmsa\.auditSummary"/, 15 * 60_000);
    // The dry-run GMSA pod went through the local cluster's whole path: API server, wiring, webhooks.
    const canaryLine = JSON.parse(await canary) as Record<string, unknown>;
    assert.is(canaryLine["outcome"], "ready", JSON.stringify(canaryLine));
    const summary = JSON.parse(await audit) as Record<string, unknown>;
    assert.equal([summary["cluster"], summary["outcome"]], ["default", "audited"], JSON.stringify(summary));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGINT");
    await exited;
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

Start.run();
