import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { localWebhookUser } from "../../host/localCluster.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";

/**
 * The deploy's own script (scripts/wire-deployed.sh, which azd's postdeploy hook and the workflow
 * run) against a real API server with the local host as the function: it wires the one cluster and
 * proves it with the readiness check. Only az and kubelogin are stand-ins (az writes the local
 * cluster's kubeconfig where `az aks get-credentials` would, kubelogin has nothing to convert);
 * npm, the wiring and the check are the real ones.
 */
const root = join(__dirname, "..", "..");
const Script = suite<{ cluster: E2eCluster }>("the deploy script through a real API server");

Script.before(async (context) => {
  context.cluster = await startE2eCluster();
});

Script.after(async ({ cluster }) => {
  await cluster?.close();
});

Script("wires the one cluster, then proves it ready; a function that cannot be called fails the deploy in the check's words", async ({ cluster }) => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-deploy-script-"));
  const bin = join(dir, "bin");
  mkdirSync(bin);
  writeFileSync(
    join(bin, "az"),
    `#!/usr/bin/env bash
set -eu
if [ "$1 $2" = "aks get-credentials" ]; then while [ "$1" != --file ]; do shift; done; cp "${cluster.local.adminKubeconfig}" "$2"; fi
`,
  );
  writeFileSync(join(bin, "kubelogin"), "#!/usr/bin/env bash\nexit 0\n");
  for (const name of ["az", "kubelogin"]) chmodSync(join(bin, name), 0o755);
  const caFile = join(dir, "function-ca.crt");
  writeFileSync(caFile, cluster.webhook.caPem);
  // Asynchronously: the function it wires answers from this very process.
  const run = (baseUrl: string, checkSeconds = "20") =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        "bash",
        [join(root, "scripts", "wire-deployed.sh")],
        { cwd: root, encoding: "utf8", timeout: 120_000, env: runEnv(baseUrl, checkSeconds) },
        (error, stdout, stderr) => resolve({ status: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }),
      );
    });
  const runEnv = (baseUrl: string, checkSeconds: string) => ({
    PATH: `${bin}:${join(root, "node_modules", ".bin")}:${process.env.PATH ?? ""}`,
    HOME: process.env.HOME ?? dir,
    TMPDIR: dir,
    GMSA_AKS_RESOURCE_ID: "/subscriptions/1111/resourceGroups/rg-local/providers/Microsoft.ContainerService/managedClusters/local",
    WEBHOOK_BASE_URL: baseUrl,
    WIRE_MODE: "url",
    IDENTITY_PRINCIPAL_ID: localWebhookUser,
    GMSA_FUNCTION_CA_FILE: caFile,
    GMSA_CHECK_TIMEOUT_SECONDS: checkSeconds,
  });
  const wired = await run(cluster.webhook.server.url);
  assert.is(wired.status, 0, `${wired.stdout}\n${wired.stderr}`);
  assert.match(wired.stdout, /wire-deployed: wiring local in rg-local/);
  assert.match(wired.stdout, /MutatingWebhookConfiguration\/gmsa-admission: applied/);
  assert.match(wired.stdout, /check: ready: the API server called the webhooks through the wiring/);

  // The same deploy pointing the cluster at a port where no function answers: wired, then refused.
  const broken = await run("https://127.0.0.1:1", "0");
  assert.is(broken.status, 1, `${broken.stdout}\n${broken.stderr}`);
  assert.match(broken.stderr, /check: NOT READY \(apiServerToWebhook\): the API server could not call the webhook/);
  // Put back for whatever runs next.
  assert.is((await run(cluster.webhook.server.url)).status, 0);
});

Script.run();
