import { suite } from "uvu";
import * as assert from "uvu/assert";
import { credSpecNameProblem } from "../../../lib/gmsa/credSpecName.js";
import { jsonPointer } from "../../../lib/webhook/jsonPatch.js";

const Names = suite("credSpecNameProblem");

for (const name of ["webapp1-credspec", "a", "payroll.gmsa", "0abc", "a".repeat(253), "x.y-z.0"]) {
  Names(`accepts ${JSON.stringify(name.length > 40 ? `${name.slice(0, 10)}… (${name.length})` : name)}`, () => assert.is(credSpecNameProblem(name), undefined));
}
const bad: Array<[string, RegExp]> = [
  ["", /empty/],
  ["a".repeat(254), /longer than 253/],
  ["WebApp", /lower case/],
  ["-start", /start and end/],
  ["end-", /start and end/],
  ["a..b", /lower case/],
  ["../../api/v1/secrets", /lower case/],
  ["a/b", /lower case/],
  ["a b", /lower case/],
  ["naïve", /lower case/],
];
for (const [name, problem] of bad) {
  Names(`refuses ${JSON.stringify(name.length > 40 ? `${name.slice(0, 10)}… (${name.length})` : name)}`, () => assert.match(credSpecNameProblem(name) ?? "", problem));
}
Names.run();

const Pointer = suite("jsonPointer");
Pointer("escapes ~ before / so that each survives (RFC 6901)", () => {
  assert.is(
    jsonPointer(["metadata", "annotations", "pod.alpha.windows.kubernetes.io/gmsa-credential-spec"]),
    "/metadata/annotations/pod.alpha.windows.kubernetes.io~1gmsa-credential-spec",
  );
  assert.is(jsonPointer(["a~/b", 0]), "/a~0~1b/0");
});
Pointer.run();
