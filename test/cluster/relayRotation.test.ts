import { suite } from "uvu";
import * as assert from "uvu/assert";
import { certificatesOf, previousRelayCas } from "../../cluster/relayCaRotation.js";
import { issueRelayCertificate } from "../../cluster/relayCertificate.js";
import { rolloutState } from "../../cluster/relayRollout.js";

/** What a rotation keeps trusting, and when a rollout counts as done. */
const Rotation = suite<{ a: string; b: string; c: string }>("relay CA rotation", { a: "", b: "", c: "" });

Rotation.before(async (context) => {
  context.a = (await issueRelayCertificate("ns")).caPem;
  context.b = (await issueRelayCertificate("ns")).caPem;
  context.c = (await issueRelayCertificate("ns")).caPem;
});

Rotation("nothing to keep when the only CA serving is the new one", ({ a }) => {
  assert.is(previousRelayCas(a, [a, `${a}\n`]), "");
});

Rotation("keeps the Secret's CA and any other the webhooks still trust, once each, never the new one", ({ a, b, c }) => {
  const kept = previousRelayCas(c, [a, `${a}\n${b}\n${c}\n`]);
  assert.equal(certificatesOf(kept), certificatesOf(`${a}\n${b}\n`));
});

Rotation("a bundle that does not parse adds nothing", ({ c }) => {
  assert.is(previousRelayCas(c, ["not a certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]), "");
});

const deployment = (generation: number, status?: Record<string, unknown>) => ({ metadata: { generation }, spec: { replicas: 2 }, status });

const rollouts: ReadonlyArray<readonly [string, ReturnType<typeof deployment>, boolean]> = [
  ["no status yet", deployment(2), false],
  ["the controller has not seen the new generation", deployment(2, { observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }), false],
  ["one replica updated", deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 2 }), false],
  ["all updated, an old one still there", deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 2, availableReplicas: 3 }), false],
  ["all updated, not all available", deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1 }), false],
  ["all updated and available, nothing old left", deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }), true],
];

for (const [name, live, done] of rollouts) {
  Rotation(`rollout ${done ? "done" : "not done"}: ${name}`, () => {
    assert.is(rolloutState(live).done, done);
  });
}

Rotation("a rollout past its progress deadline is stuck", () => {
  const state = rolloutState(
    deployment(2, {
      observedGeneration: 2,
      replicas: 3,
      updatedReplicas: 1,
      availableReplicas: 2,
      conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }],
    }),
  );
  assert.ok(!state.done && state.stuck);
});

Rotation.run();
