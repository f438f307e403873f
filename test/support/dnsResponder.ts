import { createSocket, type RemoteInfo } from "node:dgram";

/**
 * A tiny DNS server on loopback that knows a few names (A records only): the relay resolves the
 * function's host name while it runs, as it does in the cluster through kube-dns, and a test
 * must not depend on the machine's resolver for a made-up name.
 */
export interface DnsResponder {
  readonly address: string;
  /** `address:port`, as nginx's `resolver` takes it. */
  readonly resolver: string;
  readonly queries: string[];
  close(): Promise<void>;
}

function readName(message: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let at = offset;
  for (let length = message[at] ?? 0; length !== 0; length = message[at] ?? 0) {
    if (length > 63 || at + 1 + length > message.length) throw new Error("malformed name");
    labels.push(message.subarray(at + 1, at + 1 + length).toString("ascii"));
    at += 1 + length;
  }
  return { name: labels.join(".").toLowerCase(), end: at + 1 };
}

function answer(query: Buffer, records: ReadonlyMap<string, string>, queries: string[]): Buffer | undefined {
  if (query.length < 12 || query.readUInt16BE(4) !== 1) return undefined;
  const { name, end } = readName(query, 12);
  const type = query.readUInt16BE(end);
  const question = query.subarray(12, end + 4);
  queries.push(`${name} ${type}`);
  const address = records.get(name);
  const answers = address !== undefined && type === 1 ? [address] : [];
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  // Response, recursion desired and available; NXDOMAIN for names it does not know.
  header.writeUInt16BE(0x8180 | (address === undefined ? 3 : 0), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  const recordBuffers = answers.map((ip) => {
    const record = Buffer.alloc(16);
    record.writeUInt16BE(0xc00c, 0); // the name in the question
    record.writeUInt16BE(1, 2); // A
    record.writeUInt16BE(1, 4); // IN
    record.writeUInt32BE(5, 6); // TTL
    record.writeUInt16BE(4, 10);
    ip.split(".").forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
    return record;
  });
  return Buffer.concat([header, question, ...recordBuffers]);
}

export async function startDnsResponder(names: Record<string, string>): Promise<DnsResponder> {
  const records = new Map(Object.entries(names).map(([name, ip]) => [name.toLowerCase(), ip]));
  const queries: string[] = [];
  const socket = createSocket("udp4");
  socket.on("message", (message: Buffer, peer: RemoteInfo) => {
    try {
      const reply = answer(message, records, queries);
      if (reply) socket.send(reply, peer.port, peer.address);
    } catch {
      // not a query this responder understands: no answer, as a real server might
    }
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, "127.0.0.1", () => resolve());
  });
  const { address, port } = socket.address();
  return {
    address,
    resolver: `${address}:${port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
