/**
 * Reads a request body up to `limit` + 1 bytes and stops there, so that a body sent without a
 * Content-Length (chunked) is refused as too large without first being held in memory whole.
 * The extra byte is how the caller tells "exactly the limit" from "more than the limit".
 */
export async function readBodyUpTo(body: ReadableStream<unknown> | null, limit: number): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let ended = false;
  try {
    while (size <= limit) {
      const { done, value } = await reader.read();
      if (done) {
        ended = true;
        break;
      }
      if (!(value instanceof Uint8Array)) throw new TypeError("the request body yielded something other than bytes");
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    // Past the limit, or after a chunk that is not bytes, the rest is never wanted: cancelling
    // tells the source to stop sending. A body read to its end is left as it is: releasing the
    // lock of a finished stream changes nothing, and Node builds an error to do it (its first
    // costs a cold start about 1.7 ms).
    if (!ended) void reader.cancel().catch(() => undefined);
  }
  const bytes = new Uint8Array(Math.min(size, limit + 1));
  let offset = 0;
  for (const chunk of chunks) {
    if (offset >= bytes.byteLength) break;
    const part = chunk.subarray(0, bytes.byteLength - offset);
    bytes.set(part, offset);
    offset += part.byteLength;
  }
  return bytes;
}
