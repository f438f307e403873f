import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { admissionCases } from "./admissionCases.js";
import { checkAdmissionCase, type CaseOutcome } from "./admissionProperty.js";

/**
 * A bounded run of the admission properties; `npm run fuzz` runs the same ones for long. The run
 * also counts what the cases came to: a property that no case reaches holds vacuously, so a
 * run that did not reach every check that matters fails too.
 */
const Properties = suite("admission properties");

const runs = Number(process.env.PROPERTY_RUNS ?? 300);

/** What every bounded run must reach, per 300 cases, and how to recognise it. */
const reached: ReadonlyArray<{ what: string; perRuns300: number; is: (o: CaseOutcome) => boolean }> = [
  { what: "allowed validations of a pod with GMSA settings", perRuns300: 15, is: (o) => o.webhook === "validate" && o.kind === "Pod" && o.code === 200 && o.places > 0 },
  { what: "mutations that inline contents", perRuns300: 15, is: (o) => o.webhook === "mutate" && o.inlined > 0 },
  { what: "403s for a principal without use", perRuns300: 10, is: (o) => o.code === 403 && /is not authorized to use GMSACredentialSpec/.test(o.message) },
  { what: "422s for contents that differ from the named spec", perRuns300: 5, is: (o) => o.code === 422 && /contents .*(do not match|cannot match)/.test(o.message) },
  { what: "answers cut off by the budget", perRuns300: 3, is: (o) => o.code === 504 },
  { what: "allowed ephemeral-container updates", perRuns300: 3, is: (o) => o.webhook === "validate" && o.operation === "UPDATE" && o.code === 200 && o.places > 0 },
];

// Coverage is a matter of chance per run: a rare class (a 504 needs a slow cluster and a short
// budget in the same case) can fall short in one batch of random cases. So a batch that falls
// short is followed by more, each from its own seed, up to four in all: a generator that really
// stopped reaching a check still fails, a run that was merely unlucky does not.
const maxBatches = 4;

Properties("random pods, cluster answers and updates never break the promise, and reach every check", async () => {
  const outcomes: CaseOutcome[] = [];
  const fixedSeed = process.env.PROPERTY_SEED ? Number(process.env.PROPERTY_SEED) : undefined;
  const counts = () => reached.map(({ what, perRuns300, is }) => ({ what, least: Math.ceil((perRuns300 * runs) / 300), count: outcomes.filter(is).length }));
  for (let batch = 0; batch < maxBatches; batch++) {
    await fc.assert(
      fc.asyncProperty(admissionCases, async (c) => {
        outcomes.push(await checkAdmissionCase(c));
      }),
      { numRuns: runs, ...(fixedSeed !== undefined ? { seed: fixedSeed + batch } : {}) },
    );
    if (counts().every(({ least, count }) => count >= least)) break;
  }
  const final = counts();
  console.log(`  of ${outcomes.length} cases: ${final.map((c) => `${c.count} ${c.what}`).join("; ")}`);
  for (const { what, least, count } of final) assert.ok(count >= least, `only ${count} ${what} among ${outcomes.length} cases (at least ${least} expected)`);
});

Properties.run();
