import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ofMember } from "../../../lib/app/runtime.js";
import { cacheStateLine } from "../../../lib/observability/cacheEvents.js";

const Lines = suite("a fleet member's lines name the member");

Lines("a structured line names the member in its cluster field, and stays one JSON object", () => {
  const line = ofMember("alpha", cacheStateLine("default", { state: "watchFailed", specs: 3, reason: "the watch failed" }));
  assert.equal(JSON.parse(line), { event: "gmsa.credSpecCache", cluster: "alpha", state: "watchFailed", specs: 3, reason: "the watch failed" });
});

Lines("a line in words, or braces that are no structured line, is prefixed with the member", () => {
  assert.is(ofMember("alpha", "re-reading the cluster's address failed"), `cluster "alpha": re-reading the cluster's address failed`);
  assert.is(ofMember("alpha", "{not json"), `cluster "alpha": {not json`);
  assert.is(ofMember("alpha", '{"event":"x"}'), `cluster "alpha": {"event":"x"}`, "no cluster field: not a line of a cluster");
});

Lines.run();
