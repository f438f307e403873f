import { Writable } from "node:stream";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { lineWriter } from "../../host/lineWriter.js";

/** The local host's log lines: every line, in order, one write per turn of the event loop. */
const Lines = suite("line writer");

function recorder(): { stream: Writable; writes: string[] } {
  const writes: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      writes.push(chunk.toString());
      done();
    },
  });
  return { stream, writes };
}

Lines("lines written in the same turn leave together, in order, each ending with a newline", async () => {
  const { stream, writes } = recorder();
  const writer = lineWriter(stream);
  writer.write("first");
  writer.write("second");
  writer.write("third");
  assert.equal(writes, [], "nothing is written within the turn");
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(writes, ["first\nsecond\nthird\n"]);
});

Lines("a later turn starts a new write, and flush writes what is pending at once", async () => {
  const { stream, writes } = recorder();
  const writer = lineWriter(stream);
  writer.write("a");
  await new Promise((resolve) => setImmediate(resolve));
  writer.write("b");
  writer.flush();
  assert.equal(writes, ["a\n", "b\n"]);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(writes, ["a\n", "b\n"], "the scheduled flush finds nothing left");
});

Lines.run();
