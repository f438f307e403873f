import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { setTimeout as sleep } from "node:timers/promises";
import { apiServerConnection } from "../lib/kube/apiServerConnection.js";
import { unzipSync } from "fflate";
import { applyObjects } from "../cluster/applyObjects.js";
import { packageApp } from "../scripts/package.js";
import { credSpecCache } from "../lib/kube/credSpecCache.js";
import { credSpecApi } from "../lib/kube/credSpecApi.js";
import { loadKubeconfigFile, startLocalCluster, wireLocalCluster, type LocalCluster } from "../host/localCluster.js";
import { generateServingCertificate } from "../host/servingCertificate.js";
import { credSpecFixture } from "../test/support/fixtures.js";
import { httpsCall, postReview } from "../test/support/httpsClient.js";
import { gmsa, pod, review } from "../test/support/reviews.js";
import { useGrant } from "../test/support/useGrants.js";
import { load, type LoadResult } from "./load.js";
import { descendantRunning, rssMiB, startServer, type Started } from "./processes.js";
import { fleetBench, fleetOnly } from "./fleet.js";
import { safetyNetBench, safetyNetOnly } from "./safetyNet.js";
import { productionBench } from "./production.js";

/**
 * `npm run bench`: the serving cost of the product beside a floor measured in the same run, the
 * least a Node webhook must do (bench/floorServer.js: read the AdmissionReview, parse it, answer
 * a fixed one). Both are served on core 1, loaded from core 0 by the same client with the same
 * connections and duration. Figures are printed, never asserted. The serving process is the
 * development server (npm start), not what Azure runs, so its load figures carry no target; the
 * targets are on what production shares with it (the handler's own cost) and on the deployment
 * package's cold start. One file past 400 lines on purpose: the rounds, the floor and the table
 * they print are one procedure; the fleet, production and safety-net figures have files of their own.
 */
const root = join(__dirname, "..");
const serverCore = "1";
// Each load is run `rounds` times, the product and the floor alternating (which goes first too),
// and the medians are printed: on a shared virtual machine one server measured twice in a row
// moves by 15 % or more, and a drift of the machine's speed over a run then falls on both.
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const credSpecCount = Number(process.env.BENCH_CREDSPECS ?? 1000);
const coldStarts = 5;
const credSpecName = "spec-7";
// How long the product has been without requests when its idle RSS is read after the loads.
const idleSoonMs = 5_000;
const idleSettledMs = 15_000;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

interface Row {
  readonly figure: string;
  readonly product: string;
  readonly floor: string;
  readonly ratio: string;
  readonly target: string;
}

const rows: Row[] = [];
function row(figure: string, product: number, floor: number | undefined, unit: string, target: string, digits = 3): void {
  rows.push({
    figure,
    product: `${product.toFixed(digits)} ${unit}`,
    floor: floor === undefined ? "" : `${floor.toFixed(digits)} ${unit}`,
    ratio: floor === undefined ? "" : `${(product / floor).toFixed(2)}×`,
    target,
  });
}

function printTable(): void {
  const head: Row = { figure: "figure", product: "product", floor: "floor", ratio: "ratio", target: "target" };
  const all = [head, ...rows];
  const width = (key: keyof Row) => Math.max(...all.map((r) => r[key].length));
  const line = (r: Row) => `| ${(["figure", "product", "floor", "ratio", "target"] as const).map((k) => r[k].padEnd(width(k))).join(" | ")} |`;
  console.log(line(head));
  console.log(`|${(["figure", "product", "floor", "ratio", "target"] as const).map((k) => "-".repeat(width(k) + 2)).join("|")}|`);
  for (const r of rows) console.log(line(r));
}

/** The pod every admission is about: one container naming a credential spec its namespace may use. */
function gmsaPod() {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa(credSpecName);
  return p;
}

async function prepareCluster(local: LocalCluster, webhookUrl: string, caPem: string): Promise<void> {
  const admin = loadKubeconfigFile(local.adminKubeconfig);
  await wireLocalCluster(local, { url: webhookUrl, caPem, authorizeRequestingUser: false }, [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
    ...useGrant({ name: "use-all", namespace: "apps", group: "system:serviceaccounts:apps" }),
  ]);
  const spec = credSpecFixture("payroll-gmsa").credspec!;
  await applyObjects(
    admin,
    Array.from({ length: credSpecCount }, (_, i) => ({ apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: `spec-${i}` }, credspec: spec })),
  );
}

async function reviewBodies(url: string, caPem: string, dir: string): Promise<{ mutate: string; validate: string }> {
  const created = gmsaPod();
  const answer = await postReview(`${url}/mutate`, caPem, review("CREATE", created));
  const reply = JSON.parse(answer.text) as { response?: { patch?: string } };
  const patch = JSON.parse(Buffer.from(reply.response?.patch ?? "", "base64").toString("utf8") || "[]") as Array<{ path: string; value: string }>;
  const contents = patch.find((op) => op.path.endsWith("/gmsaCredentialSpec"));
  if (!contents) throw new Error(`mutate did not inline the credential spec: ${answer.text.slice(0, 500)}`);
  const mutated = gmsaPod();
  mutated.spec.containers[0]!.securityContext = gmsa(credSpecName, contents.value);
  const files = { mutate: join(dir, "mutate.json"), validate: join(dir, "validate.json") };
  writeFileSync(files.mutate, JSON.stringify(review("CREATE", created)));
  writeFileSync(files.validate, JSON.stringify(review("CREATE", mutated)));
  return files;
}

async function waitForSync(url: string, caPem: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    // /health says ready or not; the cache's state is on /metrics.
    const status = JSON.parse((await httpsCall(`${url}/metrics`, { ca: caPem, method: "GET" })).text) as { credSpecCache?: { synced: boolean; size: number } };
    if (status.credSpecCache?.synced && status.credSpecCache.size >= credSpecCount) return;
    await sleep(100);
  }
  throw new Error("the product's credential spec cache did not sync");
}

/**
 * The policy's own work with no HTTP server: what every instance pays per admission, in CPU
 * time. Timed in a process of its own (bench/handlerDriver.js) on the compiled JavaScript that
 * `npm start` serves, with Node's default flags, as a Functions worker runs.
 */
async function handlerCost(kubeconfig: string, bodies: { mutate: string; validate: string }): Promise<Record<"mutate" | "validate", number>> {
  const driver = join(__dirname, "handlerDriver.js");
  const { stdout } = await promisify(execFile)("taskset", ["-c", serverCore, process.execPath, driver, kubeconfig, bodies.mutate, bodies.validate], {
    env: { PATH: process.env.PATH },
  });
  const figures = JSON.parse(stdout) as { mutate?: unknown; validate?: unknown };
  if (typeof figures.mutate !== "number" || typeof figures.validate !== "number") throw new Error(`the handler driver printed ${stdout.slice(0, 200)}`);
  return { mutate: figures.mutate, validate: figures.validate };
}

/**
 * Process start to the first admission answered, for the deployable package as the Functions
 * worker loads it: with its V8 code cache accepted (this machine's Node made it), and rejected,
 * as on an Azure instance whose Node 22 is another patch release (V8 then compiles the bundle).
 */
async function coldStart(kubeconfig: string, mutateBody: string): Promise<{ accepted: number[]; rejected: number[] }> {
  const { zipPath } = await packageApp();
  const unpacked = () => {
    const dir = mkdtempSync(join(tmpdir(), "gmsa-bench-package-"));
    for (const [name, bytes] of Object.entries(unzipSync(readFileSync(zipPath)))) {
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), bytes);
    }
    return dir;
  };
  const accepted = unpacked();
  const rejected = unpacked();
  // A cache V8 refuses, as it refuses one made by another release: the same size, other bytes.
  const cacheFile = join(rejected, "dist", "functions", "app.js.v8cache");
  const cache = readFileSync(cacheFile);
  for (let i = 0; i < cache.length; i += 64) cache[i] = cache[i]! ^ 0xff;
  writeFileSync(cacheFile, cache);
  const driver = join(root, "test", "package", "coldStartDriver.js");
  const run = async (dir: string, expected: string): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < coldStarts; i++) {
      const { ms, output } = await firstAnswer(driver, [dir, "mutate", JSON.stringify({ body: mutateBody })], kubeconfig);
      times.push(ms);
      if (!output.includes("patch")) throw new Error(`cold start did not patch: ${output.slice(0, 500)}`);
      if (!output.includes(`"codeCache":"${expected}"`)) throw new Error(`the code cache was not ${expected}: ${output.slice(0, 300)}`);
    }
    return times;
  };
  return { accepted: await run(accepted, "used"), rejected: await run(rejected, "rejected") };
}

/**
 * Runs the driver until it has printed the answer, then stops it: the credential spec cache it
 * started keeps watching, as it does in a Functions instance.
 */
function firstAnswer(driver: string, args: string[], kubeconfig: string): Promise<{ ms: number; output: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn("taskset", ["-c", serverCore, process.execPath, driver, ...args], {
      env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      try {
        JSON.parse(output);
      } catch {
        return;
      }
      const ms = performance.now() - started;
      child.kill("SIGKILL");
      resolve({ ms, output });
    });
    child.once("exit", (code) => reject(new Error(`the cold start driver exited with ${code}: ${output.slice(0, 500)}`)));
  });
}

async function cacheHeap(adminKubeconfig: string): Promise<{ size: number; perSpecKiB: number }> {
  const admin = loadKubeconfigFile(adminKubeconfig);
  const gc = runInNewContext("gc") as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  const connection = apiServerConnection(admin);
  const cache = credSpecCache(connection, { direct: credSpecApi(connection, { timeoutMs: 2000 }), log: () => {} });
  await cache.lookup("spec-0", { signal: new AbortController().signal });
  while (!cache.status().synced) await sleep(50);
  gc();
  const after = process.memoryUsage().heapUsed;
  const size = cache.status().size;
  await cache.stop();
  await connection.close();
  return { size, perSpecKiB: (after - before) / size / 1024 };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "gmsa-bench-"));
  const tls = await generateServingCertificate(join(work, "tls"));
  const certFile = join(work, "tls", "serving.crt");
  const keyFile = join(work, "tls", "serving.key");
  writeFileSync(certFile, tls.certPem);
  writeFileSync(keyFile, tls.keyPem, { mode: 0o600 });

  console.error("starting a local control plane…");
  const local = await startLocalCluster({ log: () => {} });
  const servers: Started[] = [];
  try {
    // BENCH_CPU_PROF=<dir>: every Node process under `npm start` writes a CPU profile there when it exits.
    const profile = process.env.BENCH_CPU_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_CPU_PROF}` } : {};
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, KUBECONFIG: local.webhookKubeconfig, PORT: "0", TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile, ...profile };
    // The local build first, from scratch and timed on its own: `npm start` then finds it up to
    // date, as it does on every start after the first.
    rmSync(join(root, "dist", "local", ".inputs"), { force: true });
    const buildStarted = performance.now();
    await new Promise<void>((resolve, reject) =>
      spawn(process.execPath, [join(root, "scripts", "build-host.js")], { stdio: ["ignore", "ignore", "inherit"] }).once("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`build-host.js exited with ${code}`)),
      ),
    );
    const buildMs = performance.now() - buildStarted;
    const product = await startServer("taskset", ["-c", serverCore, "npm", "start"], {
      env,
      output: join(work, "product.log"),
      ready: /^gmsa-admission ready at /,
      timeoutMs: 120_000,
    });
    servers.push(product);
    const productUrl = /ready at (https:\/\/[^/]+)\/mutate/.exec(product.line)![1]!;
    const productPid = descendantRunning(product.child.pid!, "host/start.");
    if (!productPid) throw new Error("cannot find the serving process under npm start");
    const serving = readFileSync(`/proc/${productPid}/cmdline`, "utf8").split("\0").join(" ").trim();

    console.error("creating credential specs…");
    await prepareCluster(local, productUrl, tls.caPem);
    const bodies = await reviewBodies(productUrl, tls.caPem, work);
    await waitForSync(productUrl, tls.caPem);
    await sleep(1000);
    const syncedRss = rssMiB(productPid);

    const floor = await startServer("taskset", ["-c", serverCore, process.execPath, join(__dirname, "floorServer.js"), certFile, keyFile], {
      env: { PATH: process.env.PATH },
      output: join(work, "floor.log"),
      ready: /^floor ready at /,
    });
    servers.push(floor);
    const floorUrl = /ready at (\S+)/.exec(floor.line)![1]!;

    const run = (url: string, pid: number, body: string, connections: number) => load({ url, bodyFile: body, pid, connections, seconds });
    // Warm both (JIT, caches, authorization answers) before anything is measured.
    let productLoaded = 0;
    const warm = async () => {
      for (const path of ["/mutate", "/validate"] as const) {
        const body = path === "/mutate" ? bodies.mutate : bodies.validate;
        await load({ url: `${productUrl}${path}`, bodyFile: body, pid: productPid, connections: 16, seconds: 3 });
        productLoaded = performance.now();
        await load({ url: `${floorUrl}${path}`, bodyFile: body, pid: floor.child.pid!, connections: 16, seconds: 3 });
      }
    };
    await warm();
    // Idle twice: soon after the loads, and once V8 has had time to shrink the heap. A few seconds
    // after allocation stops, its memory reducer runs a mark-compact that frees what the load left
    // (seen with --trace-gc: about 5 s after the last request here; RSS fell by 4.5 to 7 MiB in the
    // runs where it came after the first reading); an idle instance spends its idle time past that
    // point.
    const productIdle = (ms: number) => sleep(Math.max(0, productLoaded + ms - performance.now()));
    await productIdle(idleSoonMs);
    const soonRss = rssMiB(productPid);
    const floorSoonRss = rssMiB(floor.child.pid!);
    await productIdle(idleSettledMs);
    const idleRss = rssMiB(productPid);
    const floorIdleRss = rssMiB(floor.child.pid!);
    // Warm again: without this, the first measured load after that idle had a p99 about twice the
    // next ones' in three runs out of three (14 ms against 6 to 10), and in two of them more CPU.
    await warm();

    console.error(`loading each server ${rounds} times for ${seconds} s per run…`);
    const results: Record<string, { product: LoadResult[]; floor: LoadResult[] }> = {};
    // One round of a load on a product server and on the floor, each first in every other round.
    const alternated = async (name: string, round: number, url: string, pid: number, path: string, body: string, connections: number) => {
      const runs = (results[name] ??= { product: [], floor: [] });
      const productRun = () => run(`${url}${path}`, pid, body, connections).then((r) => runs.product.push(r));
      const floorRun = () => run(`${floorUrl}${path}`, floor.child.pid!, body, connections).then((r) => runs.floor.push(r));
      if (round % 2 === 0) await productRun().then(floorRun);
      else await floorRun().then(productRun);
      const p = runs.product.at(-1)!;
      const f = runs.floor.at(-1)!;
      if (p.failed > 0 || f.failed > 0) console.error(`${name}: ${p.failed} product and ${f.failed} floor requests failed`);
    };
    for (let round = 0; round < rounds; round++) {
      for (const [name, path, body, connections] of [
        ["mutate, 16 connections", "/mutate", bodies.mutate, 16],
        ["validate, 16 connections", "/validate", bodies.validate, 16],
        ["mutate, 64 connections", "/mutate", bodies.mutate, 64],
      ] as const) {
        await alternated(name, round, productUrl, productPid, path, body, connections);
      }
    }

    // A second serving process whose first admissions arrive together, 16 at once before its cache
    // has listed anything, as a new instance's may: it must then cost what the first does (V8's
    // allocation-site pretenuring has kept such a server slower for good; this row shows it).
    console.error("a server whose first admissions arrive together…");
    const burst = await startServer("taskset", ["-c", serverCore, "npm", "start"], {
      env,
      output: join(work, "burst.log"),
      ready: /^gmsa-admission ready at /,
      timeoutMs: 120_000,
    });
    servers.push(burst);
    const burstUrl = /ready at (https:\/\/[^/]+)\/mutate/.exec(burst.line)![1]!;
    const burstPid = descendantRunning(burst.child.pid!, "host/start.");
    if (!burstPid) throw new Error("cannot find the second serving process under npm start");
    await load({ url: `${burstUrl}/mutate`, bodyFile: bodies.mutate, pid: burstPid, connections: 16, seconds: 3 });
    await waitForSync(burstUrl, tls.caPem);
    await load({ url: `${burstUrl}/mutate`, bodyFile: bodies.mutate, pid: burstPid, connections: 16, seconds: 3 });
    const burstName = "mutate, 16 connections, a second server whose first 16 admissions came at once";
    for (let round = 0; round < rounds; round++) await alternated(burstName, round, burstUrl, burstPid, "/mutate", bodies.mutate, 16);
    await burst.stop();

    console.error("timing the handler apart from HTTP…");
    const handler = await handlerCost(local.webhookKubeconfig, bodies);
    console.error("cold starts of the deployable package…");
    const cold = await coldStart(local.webhookKubeconfig, readFileSync(bodies.mutate, "utf8"));
    const heap = await cacheHeap(local.adminKubeconfig);

    const med = (runs: LoadResult[], figure: keyof LoadResult) => median(runs.map((r) => r[figure]));
    for (const name of ["mutate, 16 connections", "validate, 16 connections"]) {
      const { product: p, floor: f } = results[name]!;
      row(`CPU per warm admission, ${name}`, med(p, "cpuPerAnswerMs"), med(f, "cpuPerAnswerMs"), "ms", "");
      row(`answers per second, ${name}`, med(p, "perSecond"), med(f, "perSecond"), "/s", "", 0);
      row(`p99 latency, ${name}`, med(p, "p99Ms"), med(f, "p99Ms"), "ms", "", 2);
    }
    const busy = results["mutate, 64 connections"]!;
    row("CPU per warm admission, mutate, 64 connections", med(busy.product, "cpuPerAnswerMs"), med(busy.floor, "cpuPerAnswerMs"), "ms", "");
    const together = results[burstName]!;
    row(
      "CPU per warm admission, mutate, 16 connections, a server whose first 16 admissions came at once",
      med(together.product, "cpuPerAnswerMs"),
      med(together.floor, "cpuPerAnswerMs"),
      "ms",
      "",
    );
    row("handler alone (no HTTP, CPU time), warm mutate", handler.mutate, undefined, "µs", "≤ 50 µs", 1);
    row("handler alone (no HTTP, CPU time), warm validate", handler.validate, undefined, "µs", "≤ 50 µs", 1);
    row(`RSS of the serving process, idle, ${credSpecCount} specs cached, before any load`, syncedRss, undefined, "MiB", "", 0);
    row(`RSS of the serving process, ${idleSoonMs / 1000} s after the loads above`, soonRss, floorSoonRss, "MiB", "", 0);
    row(`RSS of the serving process, idle, ${credSpecCount} specs cached, ${idleSettledMs / 1000} s after the loads above`, idleRss, floorIdleRss, "MiB", "", 0);
    row(
      "RSS of the serving process, peak under 64 connections",
      Math.max(...busy.product.map((r) => r.peakRssMiB)),
      Math.max(...busy.floor.map((r) => r.peakRssMiB)),
      "MiB",
      "",
      0,
    );
    row(`heap per cached credential spec (${heap.size} cached)`, heap.perSpecKiB, undefined, "KiB", "", 2);
    row(
      `cold start of the package, code cache accepted (this machine's Node; on Azure only while its Node 22 is the same release), median of ${coldStarts}`,
      median(cold.accepted),
      undefined,
      "ms",
      "≤ 150 ms",
      0,
    );
    row(
      `cold start of the package, code cache rejected (another Node 22 patch release, as Azure's may be), median of ${coldStarts}`,
      median(cold.rejected),
      undefined,
      "ms",
      "",
      0,
    );
    row("npm start → ready, build up to date", product.readyMs, undefined, "ms", "≤ 1500 ms", 0);
    row("the local build itself (scripts/build-host.js, sources changed)", buildMs, undefined, "ms", "", 0);

    console.log(
      `\nNode ${process.version}; servers on core ${serverCore}, autocannon on core 0, ${rounds} alternated runs of ${seconds} s per load (medians below); serving process: ${serving}`,
    );
    for (const [name, { product: p, floor: f }] of Object.entries(results)) {
      console.log(
        `${name}, each run: CPU per admission ${p.map((r, i) => `${(r.cpuPerAnswerMs * 1000).toFixed(0)}/${(f[i]!.cpuPerAnswerMs * 1000).toFixed(0)}`).join(", ")} µs (product/floor); p99 ${p.map((r, i) => `${r.p99Ms.toFixed(2)}/${f[i]!.p99Ms.toFixed(2)}`).join(", ")} ms`,
      );
    }
    console.log(`cold starts (ms), code cache accepted: ${cold.accepted.map((c) => c.toFixed(0)).join(", ")}; rejected: ${cold.rejected.map((c) => c.toFixed(0)).join(", ")}\n`);
    printTable();
  } finally {
    for (const server of servers) await server.stop().catch(() => {});
    await local.stop();
  }
}

setFlagsFromString("--expose-gc");
// BENCH_ONLY=production: the production path alone (the package under the Functions programming model).
const productionOnly = process.env.BENCH_ONLY === "production";
// `npm run bench -- safety-net` (or BENCH_ONLY=safety-net): the in-cluster policies' cost alone.
(safetyNetOnly()
  ? safetyNetBench()
  : (fleetOnly() ? Promise.resolve() : productionBench())
      .then(() => (fleetOnly() || productionOnly ? undefined : main()))
      .then(() => (productionOnly ? undefined : fleetBench()))
      .then(() => (fleetOnly() || productionOnly ? undefined : safetyNetBench()))
).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
