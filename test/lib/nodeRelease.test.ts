import { suite } from "uvu";
import * as assert from "uvu/assert";
import { nodeReleaseFloor, nodeReleaseProblem } from "../../lib/nodeRelease.js";

const Release = suite("nodeRelease");

Release("reads the >= bound of an engines range, a missing patch as 0", () => {
  assert.equal(nodeReleaseFloor(">=22.19 <23"), [22, 19, 0]);
  assert.equal(nodeReleaseFloor(">=22.19.3"), [22, 19, 3]);
  assert.throws(() => nodeReleaseFloor("^22.19.0"), /must start with a >= bound/);
  assert.throws(() => nodeReleaseFloor(">=22"), /must start with a >= bound/);
});

Release("a release at or past the floor runs, an older one is named with the floor", () => {
  for (const version of ["v22.19.0", "v22.19.1", "v22.23.3", "v23.0.0", "v22.100.0"]) assert.is(nodeReleaseProblem(version, ">=22.19 <23"), undefined, version);
  for (const version of ["v22.18.9", "v22.9.0", "v20.20.2", "v21.99.99"]) {
    assert.is(nodeReleaseProblem(version, ">=22.19 <23"), `gmsa-admission needs Node.js 22.19.0 or later (engines >=22.19 <23); this is ${version}`, version);
  }
  // Compared as numbers: 22.9 is older than 22.19.
  assert.ok(nodeReleaseProblem("v22.9.9", ">=22.10.0"));
  assert.match(nodeReleaseProblem("nightly", ">=22.19 <23") ?? "", /not a release this app can read; it needs 22\.19\.0 or later/);
});

Release.run();
