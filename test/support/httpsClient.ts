import { request } from "node:https";

export interface ClientReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A plain HTTPS call that trusts one CA, as the API server does with a webhook's caBundle. */
export function httpsCall(
  url: string,
  options: { ca: string; method?: string; headers?: Record<string, string>; body?: string | Uint8Array; rawPath?: string; timeoutMs?: number; servername?: string },
): Promise<ClientReply> {
  return new Promise((resolve, reject) => {
    // rawPath goes on the wire as written: a URL would normalise dots and slashes first.
    const path = options.rawPath === undefined ? {} : { path: options.rawPath };
    // The certificate is checked against this name; Node takes it from a Host header otherwise.
    const servername = options.servername === undefined ? {} : { servername: options.servername };
    const req = request(url, { method: options.method ?? "POST", ca: options.ca, headers: options.headers, ...path, ...servername }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    // A test that waits for an answer that never comes fails with this rather than hanging.
    if (options.timeoutMs !== undefined) req.setTimeout(options.timeoutMs, () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)));
    req.end(options.body);
  });
}

export function postReview(url: string, ca: string, review: unknown): Promise<ClientReply> {
  return httpsCall(url, { ca, headers: { "content-type": "application/json" }, body: JSON.stringify(review) });
}
