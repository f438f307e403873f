import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { buildSync } from "esbuild";
import { parse } from "yaml";
import { applyObjects } from "../cluster/applyObjects.js";
import { canonicalJson } from "../lib/gmsa/canonicalJson.js";
import { clusterManifests } from "../cluster/manifests.js";
import { loadKubeconfigFile, localWebhookUser, startLocalCluster } from "../host/localCluster.js";
import { appBuildOptions, assertAscii, packageApp, packageDir, trainCodeCache } from "../scripts/package.js";
import { credSpecFixture } from "../test/support/fixtures.js";
import { gmsa, pod, review } from "../test/support/reviews.js";
import { useGrant } from "../test/support/useGrants.js";
import { infraFile, valueOf } from "../test/infra/bicepTree.js";
import { instanceMemory, type InstanceMemory } from "./instanceMemory.js";

/**
 * The production path: the deployment package as the Functions worker loads and invokes it
 * (bench/workerDriver.js), reaching the cluster through Microsoft Entra with a managed identity as
 * a Function App does (the token from a stand-in for the platform's identity endpoint), beside a minimal Functions app that does the least a webhook does
 * (bench/minimalApp.js, bundled the same way), each in a process of its own on one core and with
 * the memory of one instance of the plan the infrastructure deploys (bench/instanceMemory.ts),
 * rounds alternating. Figures are ratios within this run: CPU per warm invocation, latency with
 * invocations in flight, the process's memory, and process start to the first admission answered,
 * that last one also beside a minimal app that reads its cluster the product's way
 * (bench/readingApp.mjs), which shows what of the product's start is its own.
 */
const root = join(__dirname, "..");
const core = "1";
const inFlight = 16;

/** A whole number from the environment, at least `least`; empty or anything else is refused by name. */
function wholeNumber(name: string, fallback: number, least: number): number {
  const text = process.env[name];
  if (text === undefined) return fallback;
  const value = text.trim() === "" ? Number.NaN : Number(text);
  if (!Number.isInteger(value) || value < least) throw new Error(`${name} must be a whole number of at least ${least}, not ${JSON.stringify(text)}`);
  return value;
}

/** The bench's settings, read when it starts: a bad one stops it before anything is built. */
function benchSettings() {
  return {
    rounds: wholeNumber("BENCH_ROUNDS", 5, 1),
    invocations: wholeNumber("BENCH_INVOCATIONS", 4000, 1),
    // The reviews name spec-7.
    credSpecCount: wholeNumber("BENCH_CREDSPECS", 1000, 8),
    // Starts alone, beside each round's: one start moves by tens of milliseconds with the
    // machine, and a median of five is too few for a ratio of two starts.
    extraStarts: wholeNumber("BENCH_STARTS", 20, 0),
    // 0: no limit. Unset: the instance memory infra/main.bicep deploys.
    instanceMiB: process.env.BENCH_INSTANCE_MEMORY_MB === undefined ? undefined : wholeNumber("BENCH_INSTANCE_MEMORY_MB", 0, 0),
  };
}

/** What a start alone reports (bench/workerDriver.js with 0 invocations). */
interface StartResult {
  readonly startedMs: number;
  readonly firstAnswerMs: number;
  readonly codeCache: string;
  readonly constrainedMiB: number;
}

interface DriverResult extends StartResult {
  readonly functions: Record<string, { cpuUs: number; p50Ms: number; p99Ms: number }>;
  readonly rssMiB: number;
  readonly heapMiB: number;
  readonly heapCommittedMiB: number;
  readonly externalMiB: number;
  readonly peakRssMiB: number;
  readonly heldRssMiB: number;
  readonly heapLimitMiB: number;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** The minimal app, bundled as the product is, in a package folder of its own. */
function minimalPackage(): string {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-bench-minimal-"));
  mkdirSync(join(dir, "dist"));
  buildSync({
    entryPoints: [join(__dirname, "minimalApp.js")],
    bundle: true,
    platform: "node",
    target: "node22",
    format: "cjs",
    outfile: join(dir, "dist", "main.js"),
    external: ["@azure/functions-core"],
    minify: true,
    logLevel: "warning",
  });
  copyFileSync(join(root, "host.json"), join(dir, "host.json"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "minimal", version: "1.0.0", main: "dist/main.js" }));
  return dir;
}

/**
 * The floor that reads its cluster (bench/readingApp.mjs), packaged as the product is: one bundle
 * written in the module wrapper, the package's entry point, and a V8 code cache trained on one
 * admission against the same stand-in the product's is (scripts/package.ts).
 */
async function readingPackage(work: string): Promise<string> {
  const dir = join(work, "reading");
  mkdirSync(join(dir, "dist"), { recursive: true });
  const app = join(dir, "dist", "app.js");
  buildSync({ ...appBuildOptions, entryPoints: [join(__dirname, "readingApp.mjs")], outfile: app, external: ["@azure/functions-core", "open"] });
  assertAscii(readFileSync(app));
  copyFileSync(join(root, "scripts", "packageEntry.js"), join(dir, "dist", "main.js"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "reading", version: "1.0.0", main: "dist/main.js" }));
  await trainCodeCache(join(dir, "dist", "main.js"));
  return dir;
}

/** One AdmissionReview per webhook: a pod to mutate, the pod mutate made to validate, a credential spec. */
function bodies(dir: string): string {
  const spec = credSpecFixture("payroll-gmsa");
  const created = pod({ namespace: "apps" });
  created.spec.containers[0]!.securityContext = gmsa("spec-7");
  const mutated = pod({ namespace: "apps" });
  mutated.spec.containers[0]!.securityContext = gmsa("spec-7", canonicalJson(spec.credspec));
  const credspec = parse(readFileSync(join(root, "examples", "credspecs", "webapp1.yaml"), "utf8")) as Record<string, unknown>;
  const credspecReview = {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9",
      kind: { group: "windows.k8s.io", version: "v1", kind: "GMSACredentialSpec" },
      resource: { group: "windows.k8s.io", version: "v1", resource: "gmsacredentialspecs" },
      operation: "CREATE",
      name: "webapp1-credspec",
      object: credspec,
      userInfo: { username: "admin" },
    },
  };
  const file = join(dir, "bodies.json");
  writeFileSync(
    file,
    JSON.stringify({ mutate: JSON.stringify(review("CREATE", created)), validate: JSON.stringify(review("CREATE", mutated)), "validate-credspec": JSON.stringify(credspecReview) }),
  );
  return file;
}

/** A package the driver loads, and the settings it is started with (as a Function App's). */
interface App {
  readonly folder: string;
  readonly settings: Record<string, string>;
}

/**
 * One driver run, in the instance's memory cgroup when there is one: `count` invocations per
 * webhook (a DriverResult), or a start alone with 0. Only the rounds whose figures the table gives
 * write CPU profiles (BENCH_PROFILE_DIR), so that a start alone or the unlimited round does not
 * replace them.
 */
async function drive(app: App, bodiesFile: string, memory: InstanceMemory | undefined, count: number, profile: boolean): Promise<StartResult> {
  const driver = ["taskset", "-c", core, process.execPath, join(__dirname, "workerDriver.js"), app.folder, bodiesFile, String(inFlight), String(count)];
  const [command, ...args] = memory ? memory.command(driver) : driver;
  const { stdout } = await promisify(execFile)(command!, args, {
    env: { PATH: process.env.PATH, ...(profile && process.env.BENCH_PROFILE_DIR ? { BENCH_PROFILE_DIR: process.env.BENCH_PROFILE_DIR } : {}), ...app.settings },
    maxBuffer: 1 << 20,
  });
  const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as StartResult;
  // What the process was given, as Node itself read it: a limit it did not see would leave V8 sizing its heap for this machine.
  if (memory && Math.round(result.constrainedMiB) !== memory.mib) {
    throw new Error(`${app.folder} was to run with ${memory.mib} MiB, but Node read ${result.constrainedMiB.toFixed(0)} MiB as its limit`);
  }
  return result;
}

/** The memory of one instance as infra/main.bicep deploys it. */
async function deployedInstanceMiB(): Promise<number> {
  const deployed = valueOf(await infraFile("infra/main.bicep"), "instanceMemoryMB");
  if (typeof deployed !== "number") throw new Error("infra/main.bicep gives instanceMemoryMB no number as its default");
  return deployed;
}

export async function productionBench(): Promise<void> {
  const { rounds, invocations, credSpecCount, extraStarts, instanceMiB: chosenMiB } = benchSettings();
  const instanceMiB = chosenMiB ?? (await deployedInstanceMiB());
  const memorySource = chosenMiB === undefined ? "infra/main.bicep's instanceMemoryMB" : "BENCH_INSTANCE_MEMORY_MB";
  const work = mkdtempSync(join(tmpdir(), "gmsa-bench-production-"));
  console.error("production path: a local control plane and the package…");
  const local = await startLocalCluster({ log: () => {} });
  const stops: Array<() => Promise<void>> = [];
  try {
    const admin = loadKubeconfigFile(local.adminKubeconfig);
    const spec = credSpecFixture("payroll-gmsa").credspec!;
    // The CRD and the webhook identity's RBAC, as the wiring installs them; no webhook
    // configuration: nothing here calls the functions but the driver.
    const wiring = clusterManifests({ target: { kind: "url", baseUrl: "https://127.0.0.1:1" }, subject: { kind: "User", name: localWebhookUser } }).filter(
      (o) => !o.kind.endsWith("WebhookConfiguration"),
    );
    await applyObjects(admin, [
      ...wiring,
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
      ...useGrant({ name: "use-all", namespace: "apps", group: "system:serviceaccounts:apps" }),
      ...Array.from({ length: credSpecCount }, (_, i) => ({ apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: `spec-${i}` }, credspec: spec })),
    ]);
    await packageApp();
    // The product reaches the cluster as it does in Azure: Microsoft Entra access with the Function
    // App's managed identity, its token from the platform's identity endpoint (a stand-in here
    // that hands out the webhook identity's token, which this API server accepts).
    const identity = await identityEndpoint(webhookToken(local.webhookKubeconfig));
    stops.push(identity.close);
    const productSettings = {
      GMSA_CLUSTER_ACCESS: "entra",
      GMSA_API_SERVER_URL: local.controlPlane.server,
      GMSA_API_SERVER_CA: local.controlPlane.caPem,
      AZURE_CLIENT_ID: "00000000-0000-4000-8000-00000000b0b0",
      IDENTITY_ENDPOINT: identity.url,
      IDENTITY_HEADER: identity.header,
    };
    const productApp: App = { folder: packageDir, settings: productSettings };
    const minimalApp: App = { folder: minimalPackage(), settings: {} };
    const readingApp: App = { folder: await readingPackage(work), settings: productSettings };
    const bodiesFile = bodies(work);
    const product: DriverResult[] = [];
    const floor: DriverResult[] = [];
    const made = instanceMiB > 0 ? instanceMemory(instanceMiB) : { unavailable: "BENCH_INSTANCE_MEMORY_MB=0" };
    const memory = "unavailable" in made ? undefined : made;
    const unavailable = "unavailable" in made ? made.unavailable : undefined;
    if (memory) {
      stops.push(async () => {
        const left = memory.remove();
        if (left) console.error(`warning: ${left}`);
      });
    }
    // A measured round: in the instance's memory, profiled when asked; or, for comparison, with neither.
    const round = async (app: App, limited = true) => (await drive(app, bodiesFile, limited ? memory : undefined, invocations, limited)) as DriverResult;
    const start = (app: App) => drive(app, bodiesFile, memory, 0, false);
    console.error(`production path: ${rounds} alternated rounds of ${invocations} invocations per webhook, ${inFlight} in flight…`);
    for (let i = 0; i < rounds; i++) {
      const productRun = async () => void product.push(await round(productApp));
      const floorRun = async () => void floor.push(await round(minimalApp));
      if (i % 2 === 0) await productRun().then(floorRun);
      else await floorRun().then(productRun);
    }
    const startsOf = new Map<App, StartResult[]>([
      [productApp, [...product]],
      [minimalApp, [...floor]],
      [readingApp, []],
    ]);
    console.error(`production path: ${extraStarts} more starts of each app, and of a minimal app that reads its cluster, in turn…`);
    // The reading app starts as often as the others, and once at least; who goes first rotates.
    for (let i = 0; i < Math.max(extraStarts, 1); i++) {
      const turn = i < extraStarts ? [productApp, minimalApp, readingApp] : [readingApp];
      for (let k = 0; k < turn.length; k++) {
        const app = turn[(i + k) % turn.length]!;
        startsOf.get(app)!.push(await start(app));
      }
    }
    const productStarts = startsOf.get(productApp)!;
    const floorStarts = startsOf.get(minimalApp)!;
    const readingStarts = startsOf.get(readingApp)!;
    // For comparison, one round of each as V8 sizes the heap with no limit but this machine's memory.
    const unlimited = memory ? { product: await round(productApp, false), floor: await round(minimalApp, false) } : undefined;
    const rows: string[][] = [["figure", "product", "minimal app", "ratio", "each round's ratio", "target", ""]];
    const add = (figure: string, p: number, f: number, unit: string, digits: number, target?: { text: string; met: boolean }, rounds?: readonly number[]) =>
      rows.push([
        figure,
        `${p.toFixed(digits)} ${unit}`,
        `${f.toFixed(digits)} ${unit}`,
        `${(p / f).toFixed(2)}×`,
        rounds === undefined ? "" : `${Math.min(...rounds).toFixed(2)}–${Math.max(...rounds).toFixed(2)}×`,
        target?.text ?? "",
        target === undefined ? "" : target.met ? "pass" : "FAIL",
      ]);
    for (const name of Object.keys(product[0]!.functions)) {
      const cpu = [median(product.map((r) => r.functions[name]!.cpuUs)), median(floor.map((r) => r.functions[name]!.cpuUs))] as const;
      // Each round's product and minimal app ran one after the other: how far their ratio moves
      // from round to round says how much of the figure is the machine.
      const byRound = product.map((r, i) => r.functions[name]!.cpuUs / floor[i]!.functions[name]!.cpuUs);
      add(`CPU per warm invocation, ${name}`, cpu[0], cpu[1], "µs", 0, { text: "≤ 1.5× the minimal app", met: cpu[0] <= 1.5 * cpu[1] }, byRound);
      add(`p50 with ${inFlight} in flight, ${name}`, median(product.map((r) => r.functions[name]!.p50Ms)), median(floor.map((r) => r.functions[name]!.p50Ms)), "ms", 2);
      add(`p99 with ${inFlight} in flight, ${name}`, median(product.map((r) => r.functions[name]!.p99Ms)), median(floor.map((r) => r.functions[name]!.p99Ms)), "ms", 2);
    }
    const rss = [median(product.map((r) => r.rssMiB)), median(floor.map((r) => r.rssMiB))] as const;
    add("RSS of the process after the invocations, full GC", rss[0], rss[1], "MiB", 0, { text: "≤ the minimal app's + 30 MiB", met: rss[0] <= rss[1] + 30 });
    add("RSS at its peak, during the run", median(product.map((r) => r.peakRssMiB)), median(floor.map((r) => r.peakRssMiB)), "MiB", 0);
    add("RSS once V8 has given back the pages it keeps free (last-resort GC)", median(product.map((r) => r.heldRssMiB)), median(floor.map((r) => r.heldRssMiB)), "MiB", 0);
    if (unlimited) {
      add(
        `RSS after the invocations, full GC, with no memory limit (V8's heap limit ${unlimited.product.heapLimitMiB.toFixed(0)} MiB; one round)`,
        unlimited.product.rssMiB,
        unlimited.floor.rssMiB,
        "MiB",
        0,
      );
    }
    add("heap in use after the invocations, full GC", median(product.map((r) => r.heapMiB)), median(floor.map((r) => r.heapMiB)), "MiB", 1);
    // What RSS holds besides the heap in use: the heap V8 keeps committed, and memory outside it (buffers, sockets' TLS state).
    add("heap committed by V8 after the invocations", median(product.map((r) => r.heapCommittedMiB)), median(floor.map((r) => r.heapCommittedMiB)), "MiB", 1);
    add("memory outside the heap (external)", median(product.map((r) => r.externalMiB)), median(floor.map((r) => r.externalMiB)), "MiB", 1);
    add(
      `process start → functions registered (medians of ${productStarts.length} starts)`,
      median(productStarts.map((r) => r.startedMs)),
      median(floorStarts.map((r) => r.startedMs)),
      "ms",
      0,
    );
    const first = [median(productStarts.map((r) => r.firstAnswerMs)), median(floorStarts.map((r) => r.firstAnswerMs))] as const;
    add("process start → first admission answered (the product asks the API server)", first[0], first[1], "ms", 0, {
      text: "≤ 1.7× the minimal app's",
      met: first[0] <= 1.7 * first[1],
    });
    const readingFirst = median(readingStarts.map((r) => r.firstAnswerMs));
    const width = (i: number) => Math.max(...rows.map((r) => r[i]!.length));
    console.log(
      `\nProduction path: the package under the Functions programming model (bench/workerDriver.js) beside a minimal app, core ${core}, medians of ${rounds} rounds; the package's code cache: ${[...new Set(product.map((r) => r.codeCache))].join(", ")}`,
    );
    console.log(
      memory
        ? `each process had the memory of one instance: ${memory.mib} MiB (${memorySource}), as a cgroup's limit that Node read; V8 sized its heap to ${median(product.map((r) => r.heapLimitMiB)).toFixed(0)} MiB`
        : `warning: the processes had this machine's memory (${(totalmem() / 1073741824).toFixed(0)} GiB), not an instance's (${instanceMiB > 0 ? `no memory cgroup could be made: ${unavailable}` : unavailable}): V8 sized its heap to ${median(product.map((r) => r.heapLimitMiB)).toFixed(0)} MiB, which no instance does, and the memory figures are not an instance's`,
    );
    console.log(
      `a minimal app that also gets a managed identity token and reads one credential spec through undici (bench/readingApp.mjs, packaged with a trained code cache as the product is) answered first after ${readingFirst.toFixed(0)} ms (median of ${readingStarts.length} starts; code cache ${[...new Set(readingStarts.map((r) => r.codeCache))].join(", ")}): ${(readingFirst / first[1]).toFixed(2)}× the minimal app's, and the product's first answer is ${(first[0] / readingFirst).toFixed(2)}× that`,
    );
    console.log(
      "both apps run under a stand-in for the Functions worker (scripts/workerStandIn.js): no figure here holds the worker's own start, which comes before either app loads and lowers the start ratio, nor the gRPC message each line an invocation logs becomes, which the product pays once per admission and the minimal app never (docs/performance.md, measured under the worker itself)",
    );
    const busy = loadavg()[0]! > cpus().length;
    if (busy) console.log(`warning: the machine was busy (load average ${loadavg()[0]!.toFixed(2)} on ${cpus().length} cores): figures are less comparable`);
    for (const [i, r] of rows.entries()) {
      console.log(`| ${r.map((cell, c) => cell.padEnd(width(c))).join(" | ")} |`);
      if (i === 0) console.log(`|${r.map((_, c) => "-".repeat(width(c) + 2)).join("|")}|`);
    }
  } finally {
    for (const stop of stops) {
      try {
        await stop();
      } catch (error) {
        console.error(`warning: cleaning up after the production bench: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    await local.stop();
  }
}

/** The bearer token of the webhook identity's kubeconfig (the local cluster writes it as JSON). */
function webhookToken(kubeconfig: string): string {
  const document = JSON.parse(readFileSync(kubeconfig, "utf8")) as { users: Array<{ user: { token?: string } }> };
  const token = document.users[0]?.user.token;
  if (!token) throw new Error(`${kubeconfig} holds no token`);
  return token;
}

/**
 * A stand-in for the App Service identity endpoint (IDENTITY_ENDPOINT and IDENTITY_HEADER, as the
 * Functions platform sets them): it hands out `token`, valid for an hour, to a caller that sends the header.
 */
async function identityEndpoint(token: string): Promise<{ url: string; header: string; close: () => Promise<void> }> {
  const header = randomUUID();
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    if (request.headers["x-identity-header"] !== header) {
      response.writeHead(401).end();
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(
      JSON.stringify({
        access_token: token,
        expires_on: String(Math.floor(Date.now() / 1000) + 3600),
        resource: url.searchParams.get("resource"),
        token_type: "Bearer",
        client_id: url.searchParams.get("client_id"),
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/msi/token`,
    header,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
