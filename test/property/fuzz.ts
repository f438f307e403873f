import fc from "fast-check";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { admissionCases, type AdmissionCase } from "./admissionCases.js";
import { checkAdmissionCase } from "./admissionProperty.js";

/**
 * `npm run fuzz [runs] [seed]`: the admission properties for a long run (FUZZ_RUNS and
 * FUZZ_SEED work too). Prints the rate as it goes and, on a failure, the shrunk counterexample
 * with the seed and path that replay it. `npm run fuzz -- safety-net [runs] [seed]`: the agreement
 * of the in-cluster policy with the function, through a real kube-apiserver, for long (default
 * 2 000 pods: about two minutes); `npm run fuzz -- safety-net-credspecs [runs] [seed]`: the same
 * for the credential spec policy and the credential spec webhook's rules.
 */
function options(): { runs: number; seed: number } | undefined {
  const runs = Number(process.argv[2] ?? process.env.FUZZ_RUNS ?? 100_000);
  const seedText = process.argv[3] ?? process.env.FUZZ_SEED;
  const seed = seedText === undefined ? Date.now() ^ (Math.random() * 2 ** 31) : Number(seedText);
  return Number.isInteger(runs) && runs >= 1 && Number.isInteger(seed) ? { runs, seed } : undefined;
}

// Long strings and lists make a counterexample unreadable: show their start and size.
function compact(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, v: unknown) => {
      if (typeof v === "string" && v.length > 80) return `${v.slice(0, 60)}… (${v.length} characters)`;
      if (Array.isArray(v) && v.length > 6) return [...v.slice(0, 3), `… (${v.length} items)`];
      return v;
    },
    1,
  );
}

async function fuzz(runs: number, seed: number): Promise<void> {
  let done = 0;
  const started = performance.now();
  let lastReport = started;
  const report = (final = false) => {
    const seconds = (performance.now() - started) / 1000;
    console.log(`${final ? "ran" : "…"} ${done} cases in ${seconds.toFixed(1)} s: ${(done / seconds).toFixed(0)} cases per second`);
  };
  console.log(`fuzzing ${runs} admissions, seed ${seed}`);
  const out = await fc.check(
    fc.asyncProperty(admissionCases, async (c: AdmissionCase) => {
      done++;
      if (performance.now() - lastReport > 10_000) {
        lastReport = performance.now();
        report();
      }
      await checkAdmissionCase(c);
    }),
    { numRuns: runs, seed },
  );
  report(true);
  if (!out.failed) {
    console.log(`all ${out.numRuns} cases kept every property`);
    return;
  }
  const error = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
  console.log(`FAILED after ${out.numRuns} cases, shrunk ${out.numShrinks} times: ${error}`);
  console.log(`replay: npm run fuzz ${runs} ${out.seed}   (path ${out.counterexamplePath})`);
  console.log(`counterexample: ${compact(out.counterexample?.[0])}`);
  process.exitCode = 1;
}

// Only when run as a program: a test runner that loads every file of the folder must not start it.
/** The agreement properties that run through a real API server: the test file, and its runs and seed variables. */
const throughApiServer: Record<string, { file: string; runs: string; seed: string }> = {
  "safety-net": { file: "safetyNetAgreement", runs: "SAFETY_NET_AGREEMENT_RUNS", seed: "PROPERTY_SEED" },
  "safety-net-credspecs": { file: "safetyNetCredSpecs", runs: "SAFETY_NET_CREDSPEC_RUNS", seed: "SAFETY_NET_CREDSPEC_SEED" },
};

const chosenProperty = throughApiServer[process.argv[2] ?? ""];
if (require.main === module && chosenProperty) {
  const [runs = "2000", seed] = process.argv.slice(3);
  const uvu = join(__dirname, "..", "..", "node_modules", ".bin", "uvu");
  const run = spawnSync(uvu, ["-r", "tsx", "test/e2e", `${chosenProperty.file}\\.test\\.ts$`], {
    cwd: join(__dirname, "..", ".."),
    stdio: "inherit",
    env: { ...process.env, [chosenProperty.runs]: runs, ...(seed === undefined ? {} : { [chosenProperty.seed]: seed }) },
  });
  process.exitCode = run.status ?? 1;
} else if (require.main === module) {
  const chosen = options();
  if (!chosen) {
    console.error("usage: npm run fuzz [runs] [seed]  (whole numbers; or FUZZ_RUNS, FUZZ_SEED)");
    process.exitCode = 2;
  } else {
    void fuzz(chosen.runs, chosen.seed);
  }
}
