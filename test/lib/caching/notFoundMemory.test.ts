import { suite } from "uvu";
import * as assert from "uvu/assert";
import { notFoundMemory, rememberingNotFound } from "../../../lib/caching/notFoundMemory.js";
import type { CredSpecLookup } from "../../../lib/gmsa/ports.js";

const Memory = suite("notFoundMemory");
const signal = new AbortController().signal;

Memory("recalls a name for the age asked, then forgets it", () => {
  let clock = 0;
  const memory = notFoundMemory({ now: () => clock });
  memory.remember("gone");
  clock = 999;
  assert.is(memory.recalls("gone", 1000), true);
  assert.is(memory.recalls("gone", 500), false, "a shorter age asked for is honoured");
  assert.is(memory.size, 0, "and the stale name is dropped");
});

Memory("holds at most maxEntries names, dropping the oldest", () => {
  const memory = notFoundMemory({ maxEntries: 3 });
  for (const name of ["a", "b", "c", "d"]) memory.remember(name);
  assert.is(memory.size, 3);
  assert.equal(
    ["a", "b", "c", "d"].map((n) => memory.recalls(n, 60_000)),
    [false, true, true, true],
  );
});

Memory("forgets a name on request", () => {
  const memory = notFoundMemory();
  memory.remember("soon-created");
  memory.forget("soon-created");
  assert.is(memory.recalls("soon-created", 60_000), false);
});

Memory("rememberingNotFound keeps only 'not found', never a found spec or a failure", async () => {
  const answers: Record<string, CredSpecLookup | Error> = { missing: { kind: "notFound" }, present: { kind: "found", credspec: {} }, broken: new Error("unreachable") };
  const asked: string[] = [];
  const source = rememberingNotFound(
    {
      lookup: async (name) => {
        asked.push(name);
        const answer = answers[name]!;
        if (answer instanceof Error) throw answer;
        return answer;
      },
    },
    notFoundMemory(),
    () => 60_000,
  );
  for (let i = 0; i < 3; i++) {
    assert.equal(await source.lookup("missing", { signal }), { kind: "notFound" });
    assert.is((await source.lookup("present", { signal })).kind, "found");
    await source.lookup("broken", { signal }).then(
      () => assert.unreachable("fails"),
      (error: Error) => assert.is(error.message, "unreachable"),
    );
  }
  assert.equal(asked, ["missing", "present", "broken", "present", "broken", "present", "broken"]);
});

Memory.run();
