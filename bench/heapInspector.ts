import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import * as t from "io-ts";
import { isLeft } from "fp-ts/Either";

/**
 * A full garbage collection and the heap in use, asked of another Node process through its
 * inspector: its RSS alone moves by more with each collection than a few hundred cached objects
 * weigh. The process must have been started with `--inspect-port=0` (NODE_OPTIONS); SIGUSR1
 * opens its inspector on a free loopback port, which it prints to its stderr (`output`).
 */
export interface HeapInspector {
  /** Collects garbage, then answers the heap in use, in MiB. */
  heapAfterGcMiB(): Promise<number>;
  close(): void;
}

const Reply = t.intersection([t.type({ id: t.number }), t.partial({ result: t.unknown, error: t.unknown })]);
const HeapUsage = t.type({ usedSize: t.number, totalSize: t.number });

export async function openHeapInspector(pid: number, output: string): Promise<HeapInspector> {
  const already = readFileSync(output, "utf8").length;
  process.kill(pid, "SIGUSR1");
  let url: string | undefined;
  for (let i = 0; i < 500 && !url; i++) {
    url = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/\S+)/.exec(readFileSync(output, "utf8").slice(already))?.[1];
    if (!url) await sleep(10);
  }
  if (!url) throw new Error("the serving process opened no inspector after SIGUSR1");
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve(), { once: true });
    socket.addEventListener("error", () => reject(new Error(`cannot reach the inspector at ${url}`)), { once: true });
  });
  const pending = new Map<number, (reply: t.TypeOf<typeof Reply>) => void>();
  socket.addEventListener("message", (event) => {
    if (typeof event.data !== "string") return;
    const reply = Reply.decode(JSON.parse(event.data));
    // Notifications carry no id.
    if (isLeft(reply)) return;
    pending.get(reply.right.id)?.(reply.right);
    pending.delete(reply.right.id);
  });
  let next = 0;
  const call = (method: string): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = ++next;
      pending.set(id, (reply) => (reply.error === undefined ? resolve(reply.result) : reject(new Error(`${method}: ${JSON.stringify(reply.error)}`))));
      socket.send(JSON.stringify({ id, method }));
    });
  return {
    async heapAfterGcMiB() {
      await call("HeapProfiler.collectGarbage");
      const usage = HeapUsage.decode(await call("Runtime.getHeapUsage"));
      if (isLeft(usage)) throw new Error("unexpected answer to Runtime.getHeapUsage");
      return usage.right.usedSize / 1024 / 1024;
    },
    close: () => socket.close(),
  };
}
