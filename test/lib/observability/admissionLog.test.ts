import { suite } from "uvu";
import * as assert from "uvu/assert";
import schema from "../../../lib/observability/admission-log.json";
import { admissionLogLine, type AdmissionRecord } from "../../../lib/observability/admissionLog.js";

const Line = suite("admissionLogLine");

const record: AdmissionRecord = {
  cluster: "default",
  webhook: "mutate",
  operation: "CREATE",
  dryRun: false,
  uid: "7d1f",
  namespace: "apps",
  pod: 'web "0"',
  decision: "patched",
  code: 200,
  reason: "",
  credSpecs: ["webapp1", "payroll"],
  correlationId: "",
  detail: "line\nbreak",
  latencyMs: 1.26,
  coldStart: true,
  apiCalls: 1,
  apiErrors: 0,
  cacheHits: 2,
  cacheMisses: 3,
};

Line("one JSON object with every field the schema names, in the schema's order, and the event", () => {
  const line = admissionLogLine(record);
  assert.not.match(line, "\n");
  const parsed = JSON.parse(line) as Record<string, unknown>;
  assert.equal(Object.keys(parsed), Object.values(schema.fields));
  assert.is(parsed[schema.fields.event], schema.event);
  for (const [field, key] of Object.entries(schema.fields)) {
    if (field === "event" || field === "latencyMs") continue;
    assert.equal(parsed[key], record[field as keyof AdmissionRecord], field);
  }
  assert.is(parsed[schema.fields.latencyMs], 1.3);
});

Line.run();
