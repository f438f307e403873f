import type { KubeConfig } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { kubeConfigFor } from "../support/kubeconfigs.js";
import { memberClient } from "../../lib/fleet/memberClient.js";
import { keptClusterAccess } from "../../lib/kube/clusterClient.js";
import { readAdmissionSettings } from "../../lib/settings/admission.js";

/**
 * Second attack review, the hung-start give-up: memberClient gives a start up after
 * startTimeoutMs so that "the admissions after it start afresh", but the production start
 * (runtime defaultStart) goes through keptClusterAccess, which keeps the promise of its first
 * read until it settles. A read that hangs is never given up there, so every later start joins
 * it again, and is given up again after the same wait: the give-up restarts nothing.
 * FAILS while the kept access keeps a read the member gave up on.
 */
const Hung = suite("attack: a given-up start and the kept access");

Hung("after a start is given up, the next start reads the cluster's access afresh", async () => {
  let reads = 0;
  const settings = readAdmissionSettings({ GMSA_API_SERVER_URL: "https://unused.hcp.westeurope.azmk8s.io" });
  const access = keptClusterAccess(
    () => {
      reads += 1;
      // The first read hangs (an ARM call that never ends); a later one would answer at once.
      if (reads === 1) return new Promise<KubeConfig>(() => {});
      return Promise.resolve(kubeConfigFor({ server: "https://127.0.0.1:1", token: "t" }));
    },
    settings,
    () => {},
  );
  const logs: string[] = [];
  const member = memberClient({ name: "alpha", start: () => access.start(), startTimeoutMs: 100, log: (_level, line) => logs.push(line) });
  // The member's timers do not keep the process alive, and a hung read holds nothing open.
  const alive = setInterval(() => {}, 50);
  try {
    const first = await member.start().then(
      () => "started",
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    assert.match(first, /given up/);
    const second = await member.start().then(
      () => "started",
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    assert.is(reads, 2, `the start after the give-up did not read afresh (reads: ${reads}) and was: ${second}`);
    assert.is(second, "started");
  } finally {
    clearInterval(alive);
    await member.stop();
  }
});

Hung.run();
