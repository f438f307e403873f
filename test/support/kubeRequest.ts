import type { KubeConfig } from "@kubernetes/client-node";
import { request, type RequestOptions } from "node:https";

export interface KubeReply {
  status: number;
  body: any;
  /** The `Warning` headers, as a client such as kubectl would print them. */
  warnings: string[];
}

/**
 * One raw call to the API server with a kubeconfig's credentials, so a test sees exactly what a
 * client sees: status, Status message and warnings.
 */
export async function kubeRequest(config: KubeConfig, method: string, path: string, body?: unknown, contentType = "application/json"): Promise<KubeReply> {
  const server = config.getCurrentCluster()!.server;
  const options: RequestOptions = { method, headers: { accept: "application/json", ...(body !== undefined ? { "content-type": contentType } : {}) } };
  await config.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, server), options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        const raw = res.headers.warning;
        const warnings = (Array.isArray(raw) ? raw : raw ? [raw] : []).map((w) => w.replace(/^299 - "(.*)"$/s, "$1"));
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          // keep the text
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, warnings });
      });
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body));
  });
}
