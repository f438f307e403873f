import { suite } from "uvu";
import * as assert from "uvu/assert";
import { webhooks } from "../../lib/app/webhooks.js";
import { createFleetRuntime, stopAdmissionRuntime, useAdmissionRuntime } from "../../lib/app/runtime.js";
import { serveAdmission } from "../../lib/app/serveAdmission.js";
import { readFleetSettings } from "../../lib/settings/fleet.js";
import { gmsa, pod, review } from "../support/reviews.js";

/**
 * Attack review, pod creator: a member whose client cannot start (ARM refused, no token) or
 * starts too slowly fails closed, and its creator is told neither the internal reason nor
 * anything about another member.
 */
const Start = suite("attack: what a pod creator learns when a member cannot start");
const secret = "alpha-secret-".padEnd(40, "a");

function gmsaReview(): Buffer {
  const p = pod();
  p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec");
  return Buffer.from(JSON.stringify(review("CREATE", p)));
}

for (const how of ["fails", "hangs"] as const) {
  Start(`a start that ${how} is refused in plain words, without the internal reason`, async () => {
    const fleet = readFleetSettings({
      GMSA_CLUSTERS: JSON.stringify({
        alpha: { apiServerUrl: "https://alpha-dns.privatelink.westeurope.azmk8s.io" },
        beta: { apiServerUrl: "https://beta-dns.privatelink.westeurope.azmk8s.io" },
      }),
      GMSA_CLUSTER_SECRET_ALPHA: secret,
      GMSA_CLUSTER_SECRET_BETA: "beta-secret-0123456789".padEnd(40, "b"),
      GMSA_ADMISSION_BUDGET_MS: "500",
      GMSA_API_TIMEOUT_MS: "500",
    });
    let starts = 0;
    const runtime = await createFleetRuntime(fleet, {
      log: () => {},
      startMember: (member) => {
        starts += 1;
        if (how === "hangs") return new Promise<never>(() => undefined);
        return Promise.reject(new Error(`ARM said 403 for ${member.name} at alpha.internal.example, identity 11111111-2222`));
      },
    });
    useAdmissionRuntime(runtime);
    const logs: string[] = [];
    try {
      const replies = [];
      for (let i = 0; i < 3; i++) {
        const body = gmsaReview();
        replies.push(
          await serveAdmission(
            webhooks.mutate,
            { method: "POST", contentType: "application/json", contentLength: String(body.length), timeout: null, readBody: async () => body },
            { info: (l) => logs.push(l), warn: (l) => logs.push(l), error: (l) => logs.push(l) },
            { kind: "path", cluster: "alpha", secret },
          ),
        );
      }
      for (const reply of replies) {
        const text = Buffer.from(reply.body).toString();
        const response = JSON.parse(text).response;
        assert.is(response.allowed, false, text);
        for (const internal of ["alpha.internal.example", "11111111", "ARM said", "beta"]) assert.not.match(text, internal);
      }
      console.log(
        `    ${how}: starts ${starts}, first answer ${JSON.parse(Buffer.from(replies[0]!.body).toString()).response.status.code} "${JSON.parse(Buffer.from(replies[0]!.body).toString()).response.status.message}"`,
      );
      assert.is(runtime.members.get("beta")!.status().starts, 0);
    } finally {
      await stopAdmissionRuntime();
    }
  });
}

Start.run();
