import fc from "fast-check";
import { suite } from "uvu";
import { admissionCases } from "./admissionCases.js";
import { checkAdmissionCase } from "./admissionProperty.js";

/** A bounded run of the admission properties; `npm run fuzz` runs the same ones for long. */
const Properties = suite("admission properties");

Properties("random pods, cluster answers and updates never break the promise", async () => {
  await fc.assert(
    fc.asyncProperty(admissionCases, async (c) => {
      await checkAdmissionCase(c);
    }),
    { numRuns: Number(process.env.PROPERTY_RUNS ?? 300), ...(process.env.PROPERTY_SEED ? { seed: Number(process.env.PROPERTY_SEED) } : {}) },
  );
});

Properties.run();
