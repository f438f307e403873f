import { execFileSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { CustomObjectsApi } from "@kubernetes/client-node";
import { packageApp } from "../scripts/package.js";
import { credSpecCache } from "../lib/kube/credSpecCache.js";
import { credSpecApi } from "../lib/kube/credSpecApi.js";
import { loadKubeconfigFile, startLocalCluster } from "../host/localCluster.js";
import { credSpecFixture } from "../test/support/fixtures.js";
import { startE2eCluster } from "../test/support/e2eCluster.js";
import { postReview } from "../test/support/httpsClient.js";
import { gmsa, pod, review } from "../test/support/reviews.js";
import { useGrant } from "../test/support/useGrants.js";

/**
 * `npm run bench`: the figures behind the speed and memory claims, printed, never asserted.
 *  1. cold start: loading the bundled package against loading the compiled modules one by one;
 *  2. admission latency through the local host with warm caches, against a real API server;
 *  3. memory of the credential spec cache holding thousands of specs from a real API server.
 */
const root = join(__dirname, "..");
const runs = 7;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function loadTime(entries: string[]): number {
  const script = `
    const Module = require("node:module");
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (r, ...rest) { return r === "@azure/functions-core" ? r : resolve.call(this, r, ...rest); };
    require.cache["@azure/functions-core"] = { id: "x", filename: "x", loaded: true, exports: { setProgrammingModel() {}, registerFunction() { return { dispose() {} }; }, registerHook() { return { dispose() {} }; }, log() {} } };
    const t = process.hrtime.bigint();
    for (const e of ${JSON.stringify(entries)}) require(e);
    process.stdout.write(String(Number(process.hrtime.bigint() - t) / 1e6));`;
  return Number(execFileSync(process.execPath, ["-e", script], { env: { PATH: process.env.PATH, KUBECONFIG: "/dev/null" }, encoding: "utf8" }));
}

async function coldStart(): Promise<void> {
  const { zipBytes } = await packageApp();
  execFileSync("npx", ["tsc", "-p", "tsconfig.json", "--outDir", join(root, "dist", "build")], { cwd: root, stdio: "inherit" });
  const compiled = readdirSync(join(root, "dist", "build", "functions"))
    .filter((f) => f.endsWith(".js"))
    .map((f) => join(root, "dist", "build", "functions", f));
  const bundled = Array.from({ length: runs }, () => loadTime([join(root, "dist", "functions", "main.js")]));
  const modules = Array.from({ length: runs }, () => loadTime(compiled));
  console.log(`cold start (median of ${runs} loads of every function module, Node ${process.version}):`);
  console.log(`  compiled modules from node_modules: ${median(modules).toFixed(0)} ms`);
  console.log(`  bundled package (${(zipBytes / 1024).toFixed(0)} KiB zip):    ${median(bundled).toFixed(0)} ms`);
}

async function latency(): Promise<void> {
  const cluster = await startE2eCluster();
  try {
    await cluster.apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
      ...useGrant({ name: "use-all", namespace: "apps", group: "system:serviceaccounts:apps" }),
    ]);
    const p = pod();
    p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
    const send = (path: string) => postReview(`${cluster.webhook.server.url}${path}`, cluster.webhook.caPem, review("CREATE", p));
    for (let i = 0; i < 50; i++) await send(i % 2 ? "/mutate" : "/validate");
    await new Promise((r) => setTimeout(r, 500));
    for (const path of ["/mutate", "/validate"]) {
      const times: number[] = [];
      for (let i = 0; i < 1000; i++) {
        const started = performance.now();
        await send(path);
        times.push(performance.now() - started);
      }
      console.log(`${path}, 1000 sequential HTTPS admissions, warm caches: p50 ${percentile(times, 50).toFixed(2)} ms, p95 ${percentile(times, 95).toFixed(2)} ms, p99 ${percentile(times, 99).toFixed(2)} ms`);
    }
  } finally {
    await cluster.close();
  }
}

async function cacheMemory(count: number): Promise<void> {
  const local = await startLocalCluster({ log: () => {} });
  try {
    const admin = loadKubeconfigFile(local.adminKubeconfig);
    const { applyObjects } = await import("../cluster/applyObjects.js");
    const { credSpecCrd } = await import("../cluster/credSpecCrd.js");
    await applyObjects(admin, [credSpecCrd() as never]);
    const api = admin.makeApiClient(CustomObjectsApi);
    const spec = credSpecFixture("payroll-gmsa").credspec!;
    for (let i = 0; i < count; i += 25) {
      await Promise.all(
        Array.from({ length: Math.min(25, count - i) }, (_, j) =>
          api.createClusterCustomObject({ group: "windows.k8s.io", version: "v1", plural: "gmsacredentialspecs", body: { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: `spec-${i + j}` }, credspec: spec } }),
        ),
      );
    }
    const gc = runInNewContext("gc") as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    const settings = { apiTimeoutMs: 2000 };
    const cache = credSpecCache(admin, { direct: credSpecApi(api, { timeoutMs: settings.apiTimeoutMs }), log: () => {} });
    const started = performance.now();
    await cache.lookup("spec-0", new AbortController().signal);
    while (!cache.status().synced) await new Promise((r) => setTimeout(r, 50));
    const syncMs = performance.now() - started;
    gc();
    const after = process.memoryUsage().heapUsed;
    console.log(`credential spec cache: ${cache.status().size} specs synced in ${syncMs.toFixed(0)} ms, heap +${((after - before) / 1024 / 1024).toFixed(1)} MiB (${((after - before) / cache.status().size / 1024).toFixed(2)} KiB per spec)`);
    await cache.stop();
  } finally {
    await local.stop();
  }
}

setFlagsFromString("--expose-gc");
void (async () => {
  await coldStart();
  await latency();
  await cacheMemory(Number(process.env.BENCH_CREDSPECS ?? 3000));
  process.exit(0);
})().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
