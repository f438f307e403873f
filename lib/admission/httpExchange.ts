import { parseGoDurationMs } from "./goDuration.js";
import type { WebhookPolicy } from "../webhook/policy.js";
import { handleReview, type ReviewBudget } from "./handleReview.js";
import { encodeReview } from "./response.js";
import type { AdmissionRecord } from "../observability/admissionLog.js";

/**
 * The HTTP rules of a webhook endpoint, apart from any HTTP library: method, media type, body
 * size, JSON. Malformed HTTP gets an HTTP error; anything that is an AdmissionReview gets an
 * AdmissionReview back.
 */
export interface HttpCall {
  readonly method: string;
  readonly contentType: string | null;
  readonly contentLength: string | null;
  /** The API server's `?timeout=` query value, if any. */
  readonly timeout: string | null;
  /** Reads the body; may stop early and return more than `limit` bytes to signal "too large". */
  readBody(limit: number): Promise<Uint8Array>;
}

export interface HttpReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export type ExchangeRecord = Omit<AdmissionRecord, "cluster" | "webhook" | "latencyMs" | "coldStart">;

export const maxBodyBytes = 3 * 1024 * 1024;

// One decoder for every body: without `stream` each call stands alone, and building a fatal
// decoder costs more than decoding a small review.
const utf8 = new TextDecoder("utf-8", { fatal: true });

function isJsonMediaType(contentType: string | null): boolean {
  if (!contentType) return false;
  const essence = contentType.split(";", 1)[0]!.trim().toLowerCase();
  return essence === "application/json" || (essence.startsWith("application/") && essence.endsWith("+json"));
}

export function plainReply(status: number, message: string, headers: Record<string, string> = {}): HttpReply {
  return { status, headers: { "content-type": "text/plain; charset=utf-8", ...headers }, body: `${message}\n` };
}

export async function exchangeAdmission<P extends ReviewBudget>(call: HttpCall, policy: WebhookPolicy<P>, ports: P): Promise<{ reply: HttpReply; record?: ExchangeRecord }> {
  if (call.method.toUpperCase() !== "POST") return { reply: plainReply(405, "admission reviews are POSTed", { allow: "POST" }) };
  if (!isJsonMediaType(call.contentType)) {
    return { reply: plainReply(415, `expected Content-Type application/json, got ${call.contentType ? JSON.stringify(call.contentType.slice(0, 100)) : "none"}`) };
  }
  const declared = call.contentLength === null ? undefined : Number(call.contentLength);
  if (declared !== undefined && declared > maxBodyBytes) return { reply: tooLarge() };
  const bytes = await call.readBody(maxBodyBytes);
  if (bytes.byteLength > maxBodyBytes) return { reply: tooLarge() };

  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(bytes));
  } catch (error) {
    return { reply: plainReply(400, `the body is not JSON: ${error instanceof Error ? error.message.slice(0, 200) : "unreadable"}`) };
  }
  const outcome = await handleReview(body, policy, ports, parseGoDurationMs(call.timeout));
  if (outcome.kind === "badRequest") return { reply: plainReply(400, outcome.message) };
  return { reply: { status: 200, headers: { "content-type": "application/json" }, body: encodeReview(outcome.review) }, record: outcome.record };
}

function tooLarge(): HttpReply {
  return plainReply(413, `an admission review may be at most ${maxBodyBytes} bytes`);
}
