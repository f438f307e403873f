import { suite } from "uvu";
import * as assert from "uvu/assert";
import { similarNames } from "../../../lib/gmsa/similarNames.js";

const Similar = suite("similarNames");

const known = ["webapp1-credspec", "webapp2-credspec", "payroll-gmsa", "webapp-credspec", "web"];

Similar("names a few edits away, nearest first, never the name itself", () => {
  assert.equal(similarNames("webapp3-credspec", known), ["webapp-credspec", "webapp1-credspec", "webapp2-credspec"]);
  assert.equal(similarNames("webapp1-credspec", known), ["webapp-credspec", "webapp2-credspec"]);
  assert.equal(similarNames("webapp12-credspec", known), ["webapp1-credspec", "webapp2-credspec", "webapp-credspec"]);
  assert.equal(similarNames("payrol-gmsa", known), ["payroll-gmsa"]);
});

Similar("short names allow one edit, unrelated names none", () => {
  assert.equal(similarNames("wab", known), ["web"]);
  assert.equal(similarNames("finance", known), []);
});

Similar("at most the number asked for", () => {
  assert.equal(similarNames("webapp3-credspec", known, 1), ["webapp-credspec"]);
});

Similar.run();
