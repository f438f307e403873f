import type { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { isJsonObject as isRecord } from "../lib/jsonObject.js";

export { isRecord };

/** What `npm run credspec` reads and writes through, so tests run it without a terminal or a cluster. */
export interface CredspecIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly readFile: (path: string) => Uint8Array;
  /** The cluster `--apply` writes to: the same access as `npm run wire`. */
  readonly kubeConfig: () => KubeConfig;
}

/** A mistake in the command line: the usage is printed and the exit code is 2. */
export class UsageError extends Error {}

/** Every YAML (or JSON) document of a file; duplicate keys are an error, as the API server treats them. */
export function readDocuments(bytes: Uint8Array): unknown[] {
  const text = decodeText(bytes);
  const documents = parseAllDocuments(text, { uniqueKeys: true });
  const list = Array.isArray(documents) ? documents : [documents];
  const broken = list.find((d) => d.errors.length > 0);
  if (broken) throw new Error(`not YAML or JSON: ${broken.errors[0]!.message.split("\n", 1)[0]}`);
  return list.map((d) => d.toJS()).filter((d) => d !== null && d !== undefined);
}

export function parseJsonFile(bytes: Uint8Array, file: string): unknown {
  try {
    return JSON.parse(decodeText(bytes));
  } catch (error) {
    throw new Error(`${file} is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** PowerShell writes UTF-16 or UTF-8 with a byte-order mark depending on version and cmdlet. */
function decodeText(bytes: Uint8Array): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder("utf-16le").decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder("utf-16be").decode(bytes.subarray(2));
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes).replace(/^\uFEFF/, "");
}
