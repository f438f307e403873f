import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import * as t from "io-ts";
import { isLeft } from "fp-ts/Either";
import { generateServingCertificate } from "../host/servingCertificate.js";
import { clusterSecretHeader, clusterSecretSettingName } from "../lib/fleet/memberIdentity.js";
import { readFleetSettings } from "../lib/settings/fleet.js";
import { startFakeApiServer, type FakeApiCall, type FakeApiServer } from "../test/support/fakeApiServer.js";
import { credSpecFixture } from "../test/support/fixtures.js";
import { httpsCall } from "../test/support/httpsClient.js";
import { gmsa, pod, review } from "../test/support/reviews.js";
import { openHeapInspector, type HeapInspector } from "./heapInspector.js";
import { descendantRunning, rssMiB, startServer, type Started } from "./processes.js";

/**
 * The fleet figure of `npm run bench` (alone: `npm run bench -- fleet` or BENCH_ONLY=fleet): one
 * serving process from `npm start` with GMSA_CLUSTERS naming 20 members, each a fake API server
 * on loopback holding 200 credential specs (served by this process, with list and watch). It
 * reads the serving process's RSS and heap (after a full GC, through its inspector) before any
 * admission and after each member's first one (once that member's cache has listed its specs),
 * times those first admissions, then spreads 2 000 admissions over the members for long enough
 * that `use` decisions expire several times, and counts at the fakes what reached the API
 * servers: access reviews apart from credential spec reads. Figures are printed, never asserted.
 * One file just past 400 lines: the twenty members' set-up and the readings taken over them are
 * one procedure.
 */
const clusterCount = Number(process.env.BENCH_FLEET_CLUSTERS ?? 20);
const specsPerCluster = Number(process.env.BENCH_FLEET_CREDSPECS ?? 200);
const steadyAdmissions = Number(process.env.BENCH_FLEET_ADMISSIONS ?? 2000);
const steadySeconds = Number(process.env.BENCH_FLEET_SECONDS ?? 15);
const serverCore = "1";
const credSpecName = "spec-7";
const principal = "system:serviceaccount:apps:default";

/** `npm run bench -- fleet` or BENCH_ONLY=fleet: the fleet figure alone. */
export function fleetOnly(): boolean {
  return process.env.BENCH_ONLY === "fleet" || process.argv.slice(2).includes("fleet");
}

export interface FleetRow {
  readonly figure: string;
  readonly value: string;
  readonly target: string;
}

const MetricsReply = t.type({
  apiCalls: t.number,
  watchErrors: t.number,
  watchRestarts: t.number,
  clusters: t.record(
    t.string,
    t.type({
      state: t.string,
      starts: t.number,
      credSpecCache: t.union([t.null, t.type({ size: t.number, synced: t.boolean })]),
    }),
  ),
});
type Metrics = t.TypeOf<typeof MetricsReply>;

const AdmissionAnswer = t.type({
  response: t.intersection([t.type({ allowed: t.boolean }), t.partial({ patch: t.string, status: t.partial({ message: t.string }) })]),
});
const PatchOperations = t.array(t.intersection([t.type({ path: t.string }), t.partial({ value: t.unknown })]));
const AdmissionLine = t.type({ event: t.literal("gmsa.admission"), cluster: t.string, latencyMs: t.number });

function decode<A>(codec: t.Decoder<unknown, A>, value: unknown, what: string): A {
  const result = codec.decode(value);
  if (isLeft(result)) throw new Error(`unexpected ${what}: ${JSON.stringify(value).slice(0, 300)}`);
  return result.right;
}

/** Where the API calls of a member went: access reviews, and the three kinds of credential spec read. */
interface CallCounts {
  reviews: number;
  gets: number;
  lists: number;
  watches: number;
  other: number;
}

function countCalls(calls: readonly FakeApiCall[]): CallCounts {
  const counts: CallCounts = { reviews: 0, gets: 0, lists: 0, watches: 0, other: 0 };
  for (const call of calls) {
    if (call.method === "POST" && call.path.endsWith("subjectaccessreviews")) counts.reviews += 1;
    else if (call.method === "GET" && call.path === "/apis/windows.k8s.io/v1/gmsacredentialspecs") {
      if (new URLSearchParams(call.search).get("watch") === "true") counts.watches += 1;
      else counts.lists += 1;
    } else if (call.method === "GET" && call.path.startsWith("/apis/windows.k8s.io/v1/gmsacredentialspecs/")) counts.gets += 1;
    else counts.other += 1;
  }
  return counts;
}

function sum(counts: readonly CallCounts[]): CallCounts {
  const total: CallCounts = { reviews: 0, gets: 0, lists: 0, watches: 0, other: 0 };
  for (const c of counts) for (const key of Object.keys(total) as Array<keyof CallCounts>) total[key] += c[key];
  return total;
}

function describeCalls(c: CallCounts): string {
  const of = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;
  return `${of(c.reviews, "review", "reviews")}, ${of(c.gets, "GET", "GETs")}, ${of(c.lists, "list", "lists")}, ${of(c.watches, "watch", "watches")}${c.other ? `, ${c.other} other` : ""}`;
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;
}

/** Least-squares slope of y over x. */
function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const num = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const den = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return num / den;
}

interface Member {
  readonly name: string;
  readonly secret: string;
  readonly api: FakeApiServer;
  /** The validate review of the pod as this member's mutate left it. */
  validateBody?: string;
}

export async function fleetBench(): Promise<FleetRow[]> {
  const work = mkdtempSync(join(tmpdir(), "gmsa-bench-fleet-"));
  const tls = await generateServingCertificate(join(work, "tls"));
  const certFile = join(work, "tls", "serving.crt");
  const keyFile = join(work, "tls", "serving.key");
  writeFileSync(certFile, tls.certPem);
  writeFileSync(keyFile, tls.keyPem, { mode: 0o600 });

  console.error(`fleet: starting ${clusterCount} fake API servers with ${specsPerCluster} credential specs each…`);
  const apis: FakeApiServer[] = [];
  let server: Started | undefined;
  let inspector: HeapInspector | undefined;
  let finished = false;
  try {
    for (let i = 0; i < clusterCount; i += 5) {
      apis.push(...(await Promise.all(Array.from({ length: Math.min(5, clusterCount - i) }, () => startFakeApiServer()))));
    }
    const credspec = credSpecFixture("payroll-gmsa").credspec;
    const members: Member[] = apis.map((api, i) => {
      for (let s = 0; s < specsPerCluster; s++) api.addCredSpec(`spec-${s}`, { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", credspec });
      api.state.grants.add(`${principal}|${credSpecName}`);
      return { name: `member-${String(i + 1).padStart(2, "0")}`, secret: randomBytes(24).toString("base64url"), api };
    });

    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: "0",
      TLS_CERT_FILE: certFile,
      TLS_KEY_FILE: keyFile,
      GMSA_CLUSTERS: JSON.stringify(Object.fromEntries(members.map((m) => [m.name, { kubeconfig: m.api.kubeconfig }]))),
      ...Object.fromEntries(members.map((m) => [clusterSecretSettingName(m.name), m.secret])),
      // Passed on when set, so that the figure can be read at another TTL; otherwise the default.
      ...(process.env.GMSA_AUTH_CACHE_TTL_SECONDS ? { GMSA_AUTH_CACHE_TTL_SECONDS: process.env.GMSA_AUTH_CACHE_TTL_SECONDS } : {}),
      // Lets SIGUSR1 open the serving process's inspector on a free port, for its heap after a full GC.
      NODE_OPTIONS: "--inspect-port=0",
    };
    // The settings the serving process reads, decoded the same way here: the TTL reported is the one in force.
    const settings = readFleetSettings(env);
    const ttlMs = settings.shared.authCacheTtlMs;

    server = await startServer("taskset", ["-c", serverCore, "npm", "start"], {
      env,
      output: join(work, "fleet.log"),
      ready: /^gmsa-admission ready for \d+ clusters/,
      timeoutMs: 60_000,
    });
    const url = await servingUrl(server.output);
    const pid = descendantRunning(server.child.pid!, "host/start.");
    if (!pid) throw new Error("cannot find the serving process under npm start");

    const metrics = async (): Promise<Metrics> => {
      const reply = await httpsCall(`${url}/metrics`, { ca: tls.caPem, method: "GET" });
      return decode(MetricsReply, JSON.parse(reply.text), "/metrics answer");
    };
    const admit = async (member: Member, webhook: "mutate" | "validate", body: string) => {
      const started = performance.now();
      const reply = await httpsCall(`${url}/clusters/${member.name}/${webhook}`, {
        ca: tls.caPem,
        headers: { "content-type": "application/json", [clusterSecretHeader]: member.secret },
        body,
      });
      const ms = performance.now() - started;
      if (reply.status !== 200) throw new Error(`${member.name} ${webhook}: HTTP ${reply.status} ${reply.text.slice(0, 300)}`);
      return { ms, answer: decode(AdmissionAnswer, JSON.parse(reply.text), `${webhook} answer`) };
    };

    // A kept-alive connection to the serving process, as the API server holds one.
    const idle = await metrics();
    if (Object.values(idle.clusters).some((c) => c.state !== "idle")) throw new Error("a member started before any admission");
    inspector = await openHeapInspector(pid, server.output);
    const heap = inspector;
    await sleep(500);
    // Each reading after a full collection: the figures are what stays, not what is yet to be collected.
    const heapBefore = await heap.heapAfterGcMiB();
    const rssBefore = rssMiB(pid);

    console.error("fleet: each member's first admission…");
    const firstMs: number[] = [];
    const syncMs: number[] = [];
    const rssAfter: number[] = [];
    const heapAfter: number[] = [];
    const startCalls: CallCounts[] = [];
    const mutateBody = JSON.stringify(review("CREATE", gmsaPod()));
    for (const member of members) {
      const { ms, answer } = await admit(member, "mutate", mutateBody);
      firstMs.push(ms);
      const contents = inlinedContents(answer.response.patch);
      if (!answer.response.allowed || contents === undefined) throw new Error(`${member.name}: mutate did not inline the credential spec`);
      member.validateBody = JSON.stringify(review("CREATE", gmsaPod(contents)));
      const startedAt = performance.now();
      for (;;) {
        const cache = (await metrics()).clusters[member.name]?.credSpecCache;
        if (cache?.synced && cache.size >= specsPerCluster) break;
        if (performance.now() - startedAt > 20_000) throw new Error(`${member.name}: its credential spec cache did not sync`);
        await sleep(10);
      }
      syncMs.push(performance.now() - startedAt + ms);
      heapAfter.push(await heap.heapAfterGcMiB());
      rssAfter.push(rssMiB(pid));
      startCalls.push(countCalls(member.api.calls));
    }

    console.error(`fleet: ${steadyAdmissions} admissions over ${steadySeconds} s…`);
    // Once a member has listed its specs, a `use` decision is what expires (after its TTL): the
    // phase spans several TTLs, so that the reviews counted are those of a member serving on.
    const before = members.map((m) => m.api.calls.length);
    const metricsBefore = await metrics();
    const steadyMs: number[] = [];
    let refused = 0;
    // A failed admission is counted and reported, not thrown from a promise nobody awaits yet.
    const failures: string[] = [];
    const inFlight = new Set<Promise<void>>();
    const phaseStarted = performance.now();
    const gapMs = (steadySeconds * 1000) / steadyAdmissions;
    for (let i = 0; i < steadyAdmissions; i++) {
      const wait = phaseStarted + i * gapMs - performance.now();
      if (wait > 0) await sleep(wait);
      while (inFlight.size >= 64) await Promise.race(inFlight);
      const member = members[i % members.length]!;
      const webhook = Math.floor(i / members.length) % 2 === 0 ? "mutate" : "validate";
      const one: Promise<void> = admit(member, webhook, webhook === "mutate" ? mutateBody : member.validateBody!)
        .then(({ ms, answer }) => {
          steadyMs.push(ms);
          if (!answer.response.allowed || (webhook === "mutate" && !answer.response.patch)) refused += 1;
        })
        .catch((error: unknown) => void failures.push(error instanceof Error ? error.message : String(error)))
        .finally(() => inFlight.delete(one));
      inFlight.add(one);
    }
    await Promise.all(inFlight);
    const phaseSeconds = (performance.now() - phaseStarted) / 1000;
    const metricsAfter = await metrics();
    const steady = sum(members.map((m, i) => countCalls(m.api.calls.slice(before[i]))));
    const restarts = members.filter((m) => metricsAfter.clusters[m.name]!.starts !== 1).length;
    const heapEnd = await heap.heapAfterGcMiB();
    const rssEnd = rssMiB(pid);
    const logged = firstLatencies(server.output);

    const perMember = (readings: readonly number[]) => slope(readings.map((value, i) => [i + 1, value] as const));
    const started = sum(startCalls);
    const reads = steady.gets + steady.lists + steady.watches;
    const ttlSeconds = ttlMs / 1000;
    // One review per member and principal each time its decision has expired: about D / TTL each.
    const reviewsExpected = ttlMs > 0 ? Math.round((members.length * phaseSeconds) / ttlSeconds) : steadyAdmissions;
    const n = members.length;
    const rows: FleetRow[] = [
      { figure: "RSS of the serving process, before any admission", value: `${rssBefore.toFixed(0)} MiB`, target: "" },
      { figure: `RSS after every member's first admission, ${n} × ${specsPerCluster} specs cached`, value: `${rssAfter.at(-1)!.toFixed(0)} MiB`, target: "" },
      { figure: `RSS per member (slope over members 1 → ${n})`, value: `${perMember(rssAfter).toFixed(2)} MiB`, target: "" },
      {
        figure: "heap in use after a full GC, before any admission / after every member's first",
        value: `${heapBefore.toFixed(1)} / ${heapAfter.at(-1)!.toFixed(1)} MiB`,
        target: "",
      },
      { figure: `heap per member (slope over members 1 → ${n})`, value: `${perMember(heapAfter).toFixed(2)} MiB`, target: "" },
      {
        figure: "the first member's step, RSS / heap (one-off costs included)",
        value: `${(rssAfter[0]! - rssBefore).toFixed(1)} / ${(heapAfter[0]! - heapBefore).toFixed(1)} MiB`,
        target: "",
      },
      { figure: `first admission per member, median / max over ${n} (client)`, value: `${quantile(firstMs, 0.5).toFixed(1)} / ${Math.max(...firstMs).toFixed(1)} ms`, target: "" },
      {
        figure: "the same, as the serving process logged it (latencyMs)",
        value: logged.length === n ? `${quantile(logged, 0.5).toFixed(1)} / ${Math.max(...logged).toFixed(1)} ms` : `${logged.length} lines found`,
        target: "",
      },
      {
        figure: `first admission → member's ${specsPerCluster} specs listed, median / max`,
        value: `${quantile(syncMs, 0.5).toFixed(0)} / ${Math.max(...syncMs).toFixed(0)} ms`,
        target: "",
      },
      { figure: "API calls to bring up one member (mean)", value: describeCalls(scale(started, 1 / n)), target: "" },
      { figure: `steady state: admissions (mutate and validate alternating, ${n} members)`, value: `${steadyAdmissions} in ${phaseSeconds.toFixed(1)} s`, target: "" },
      { figure: "steady state: latency p50 / p99 (client)", value: `${quantile(steadyMs, 0.5).toFixed(1)} / ${quantile(steadyMs, 0.99).toFixed(1)} ms`, target: "" },
      { figure: "`use` decision TTL in force (GMSA_AUTH_CACHE_TTL_SECONDS)", value: `${ttlSeconds} s${process.env.GMSA_AUTH_CACHE_TTL_SECONDS ? "" : " (default)"}`, target: "" },
      {
        figure: "steady state: credential spec reads per admission (GET + list + watch)",
        value: `${(reads / steadyAdmissions).toFixed(4)} (${reads}: ${steady.gets} GETs, ${steady.lists} lists, ${steady.watches} watches)`,
        target: "≈0",
      },
      {
        figure: "steady state: access reviews per admission",
        value: `${(steady.reviews / steadyAdmissions).toFixed(4)} (${steady.reviews}; ${ttlMs > 0 ? `about ${reviewsExpected} expected = ${n} members × ${phaseSeconds.toFixed(1)} s / TTL` : "no TTL: one per admission"})`,
        target: "≈0",
      },
      {
        figure: "steady state: access reviews per member per second",
        value: `${(steady.reviews / n / phaseSeconds).toFixed(3)} (one principal per member)`,
        target: ttlMs > 0 ? "≤ 1 / TTL" : "",
      },
      {
        figure: "steady state: API calls per admission as the product counts them",
        value: `${((metricsAfter.apiCalls - metricsBefore.apiCalls) / steadyAdmissions).toFixed(4)}`,
        target: "",
      },
      { figure: "RSS / heap after the steady state", value: `${rssEnd.toFixed(0)} / ${heapEnd.toFixed(1)} MiB`, target: "" },
    ];
    if (failures.length > 0 || refused > 0 || steady.other > 0 || restarts > 0 || metricsAfter.watchErrors > 0) {
      console.error(
        `fleet: ${failures.length} failed and ${refused} refused admissions, ${steady.other} unexpected API calls, ${restarts} members restarted, ${metricsAfter.watchErrors} watch errors`,
      );
      if (failures[0]) console.error(`fleet: the first failure: ${failures[0]}`);
    }
    console.log(
      `\nFleet: ${n} members × ${specsPerCluster} credential specs (fake API servers on loopback, served by the bench process), one serving process (npm start, core ${serverCore})`,
    );
    console.log(`first admissions (ms, in member order): ${firstMs.map((ms) => ms.toFixed(0)).join(", ")}`);
    console.log(`RSS after each member (MiB): ${rssAfter.map((r) => r.toFixed(0)).join(", ")}`);
    console.log(`heap after each member, after a full GC (MiB): ${heapAfter.map((h) => h.toFixed(1)).join(", ")}\n`);
    printRows(rows);
    finished = true;
    return rows;
  } finally {
    inspector?.close();
    await server?.stop().catch(() => {});
    await Promise.all(apis.map((api) => api.close().catch(() => {})));
    for (const api of apis) rmSync(dirname(api.kubeconfig), { recursive: true, force: true });
    // The serving process's log stays when something went wrong.
    if (finished) rmSync(work, { recursive: true, force: true });
    else console.error(`fleet: the serving process's log is in ${join(work, "fleet.log")}`);
  }
}

function scale(c: CallCounts, factor: number): CallCounts {
  return { reviews: c.reviews * factor, gets: c.gets * factor, lists: c.lists * factor, watches: c.watches * factor, other: c.other * factor };
}

function gmsaPod(contents?: string) {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa(credSpecName, contents);
  return p;
}

function inlinedContents(patch: string | undefined): string | undefined {
  if (!patch) return undefined;
  const operations = decode(PatchOperations, JSON.parse(Buffer.from(patch, "base64").toString("utf8")), "patch");
  const value = operations.find((op) => op.path.endsWith("/gmsaCredentialSpec"))?.value;
  return typeof value === "string" ? value : undefined;
}

/** The URL the serving process printed for its members (the lines after the ready line). */
async function servingUrl(output: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const found = /(https:\/\/127\.0\.0\.1:\d+)\/clusters\//.exec(readFileSync(output, "utf8"));
    if (found) return found[1]!;
    await sleep(10);
  }
  throw new Error("the serving process printed no member paths");
}

/** Each member's first admission line, as the serving process logged it. */
function firstLatencies(output: string): number[] {
  const first = new Map<string, number>();
  for (const line of readFileSync(output, "utf8").split("\n")) {
    if (!line.includes('"gmsa.admission"')) continue;
    const parsed = AdmissionLine.decode(JSON.parse(line));
    if (isLeft(parsed)) continue;
    if (!first.has(parsed.right.cluster)) first.set(parsed.right.cluster, parsed.right.latencyMs);
  }
  return [...first.values()];
}

function printRows(rows: readonly FleetRow[]): void {
  const head: FleetRow = { figure: "figure", value: "fleet", target: "target" };
  const all = [head, ...rows];
  const width = (key: keyof FleetRow) => Math.max(...all.map((r) => r[key].length));
  const keys = ["figure", "value", "target"] as const;
  const line = (r: FleetRow) => `| ${keys.map((k) => r[k].padEnd(width(k))).join(" | ")} |`;
  console.log(line(head));
  console.log(`|${keys.map((k) => "-".repeat(width(k) + 2)).join("|")}|`);
  for (const r of rows) console.log(line(r));
}
