import type { ServerResponse } from "node:http";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { replyBatch } from "../../host/replyBatch.js";
import { turnQueue } from "../../host/turnQueue.js";
import { afterAwaits, markNextCheckPhase, nextTurn, unexpectedReports } from "../support/checkPhases.js";

/** The local host's answers: written together once the turn is over, each to its own response. */
const Batch = suite("reply batch");

interface Written {
  status?: number;
  headers?: Readonly<Record<string, string>>;
  body?: string;
  destroyed: boolean;
}

function response(log: string[], name: string, failOnHead = false): { res: ServerResponse; written: Written } {
  const written: Written = { destroyed: false };
  const res = {
    writeHead(status: number, headers: Record<string, string>) {
      if (failOnHead) throw new TypeError(`invalid header for ${name}`);
      written.status = status;
      written.headers = headers;
      log.push(`${name} head`);
      return this;
    },
    end(body: string) {
      written.body = body;
      log.push(`${name} end`);
      return this;
    },
    destroy() {
      written.destroyed = true;
      log.push(`${name} destroyed`);
      return this;
    },
  };
  return { res: res as unknown as ServerResponse, written };
}

const unexpected = unexpectedReports();

Batch("answers of one turn are written after it, in order, each to its own response", async () => {
  const log: string[] = [];
  const batch = replyBatch(unexpected.report);
  const a = response(log, "a");
  const b = response(log, "b");
  batch.send(a.res, { status: 200, headers: { "content-type": "application/json" }, body: "A" });
  batch.send(b.res, { status: 413, headers: { "content-type": "text/plain" }, body: "B" });
  assert.equal(log, [], "nothing is written within the turn");
  await nextTurn();
  assert.equal(log, ["a head", "a end", "b head", "b end"]);
  assert.equal([a.written.status, a.written.body, a.written.headers], [200, "A", { "content-type": "application/json" }]);
  assert.equal([b.written.status, b.written.body, b.written.headers], [413, "B", { "content-type": "text/plain" }]);
});

Batch("led by the queue that hands bodies over, an answer its task leads to is written in the same check phase", async () => {
  const log: string[] = [];
  const batch = replyBatch(unexpected.report);
  const bodies = turnQueue(unexpected.report, batch);
  const a = response(log, "a");
  bodies.push(() => {
    markNextCheckPhase(log);
    // A warm admission: a chain of awaits on settled promises, then its answer.
    afterAwaits(() => batch.send(a.res, { status: 200, headers: {}, body: "A" }));
  });
  await nextTurn();
  await nextTurn();
  assert.equal(log, ["a head", "a end", "next check phase"]);
});

Batch("an answer sent before the hand-over in the same turn does not hold back the ones the hand-over leads to", async () => {
  const log: string[] = [];
  const batch = replyBatch(unexpected.report);
  const bodies = turnQueue(unexpected.report, batch);
  const early = response(log, "early");
  const warm = response(log, "warm");
  // A refusal or a 413 sent before a body ends schedules the batch's run ahead of the hand-over.
  batch.send(early.res, { status: 413, headers: {}, body: "too large" });
  bodies.push(() => {
    markNextCheckPhase(log);
    afterAwaits(() => batch.send(warm.res, { status: 200, headers: {}, body: "W" }));
  });
  await nextTurn();
  await nextTurn();
  assert.equal(log, ["early head", "early end", "warm head", "warm end", "next check phase"]);
});

Batch("an answer sent in a later turn is written in its own", async () => {
  const log: string[] = [];
  const batch = replyBatch(unexpected.report);
  batch.send(response(log, "a").res, { status: 200, headers: {}, body: "" });
  await nextTurn();
  batch.send(response(log, "b").res, { status: 200, headers: {}, body: "" });
  assert.equal(log, ["a head", "a end"]);
  await nextTurn();
  assert.equal(log, ["a head", "a end", "b head", "b end"]);
});

Batch("an answer that cannot be written closes its connection, is reported, and the others still go", async () => {
  const log: string[] = [];
  const errors: string[] = [];
  const batch = replyBatch((error) => errors.push(error instanceof Error ? error.message : String(error)));
  const broken = response(log, "broken", true);
  const fine = response(log, "fine");
  batch.send(broken.res, { status: 200, headers: {}, body: "x" });
  batch.send(fine.res, { status: 200, headers: {}, body: "y" });
  await nextTurn();
  assert.equal(log, ["broken destroyed", "fine head", "fine end"]);
  assert.equal(errors, ["invalid header for broken"]);
  assert.is(broken.written.destroyed, true);
  assert.is(fine.written.body, "y");
});

Batch("a report that throws neither keeps the rest of the batch back nor escapes the turn", async () => {
  const log: string[] = [];
  const batch = replyBatch(() => {
    log.push("reported");
    throw new Error("the log is gone");
  });
  const broken = response(log, "broken", true);
  const fine = response(log, "fine");
  batch.send(broken.res, { status: 200, headers: {}, body: "x" });
  batch.send(fine.res, { status: 200, headers: {}, body: "y" });
  // An exception out of the flush would be uncaught and end the test process.
  await nextTurn();
  assert.equal(log, ["broken destroyed", "reported", "fine head", "fine end"]);
  assert.is(fine.written.body, "y");
});

Batch.after.each(() => unexpected.assertNone());

Batch.run();
