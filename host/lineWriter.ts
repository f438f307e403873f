/**
 * Log lines for a stream, written together once per turn of the event loop. Writing to a file or
 * a pipe is a system call per write, and under load one per admission costs more than the
 * admission: lines that arrive in the same turn leave in one write, in the order they came, and
 * whatever is left is written before the process exits.
 */
export interface LineWriter {
  write(line: string): void;
  flush(): void;
}

export function lineWriter(stream: NodeJS.WritableStream): LineWriter {
  let pending: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const text = pending.join("");
    pending = [];
    stream.write(text);
  };
  process.once("exit", flush);
  return {
    write(line) {
      pending.push(`${line}\n`);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
