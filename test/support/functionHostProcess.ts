import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** The function host in a child process, with function keys required (see keyedFunctionHost.ts). */
export interface FunctionHostProcess {
  readonly url: string;
  readonly port: number;
  /** Its log lines (one per admission among them). */
  readonly logs: string[];
  close(): Promise<void>;
}

export interface FunctionHostOptions {
  /** One cluster, served on today's paths (GMSA_CLUSTER_ACCESS=kubeconfig). */
  readonly kubeconfig?: string;
  /** Settings added to the host's environment: a fleet's GMSA_CLUSTERS and its members' GMSA_CLUSTER_SECRET_<NAME>. */
  readonly env?: Readonly<Record<string, string>>;
  readonly functionKey: string;
  readonly certFile: string;
  readonly keyFile: string;
}

export async function startFunctionHostProcess(options: FunctionHostOptions): Promise<FunctionHostProcess> {
  const setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].find((path) => existsSync(path));
  const node = [process.execPath, "--import", "tsx", join(__dirname, "keyedFunctionHost.ts")];
  const [command, ...args] = setpriv ? [setpriv, "--pdeathsig", "KILL", "--", ...node] : node;
  const child = spawn(command!, args, {
    stdio: ["ignore", "pipe", "pipe"],
    cwd: join(__dirname, "..", ".."),
    env: {
      ...process.env,
      ...(options.kubeconfig === undefined ? {} : { KUBECONFIG: options.kubeconfig, GMSA_CLUSTER_ACCESS: "kubeconfig" }),
      ...options.env,
      GMSA_REQUIRE_FUNCTION_KEY: "true",
      GMSA_FUNCTION_KEY: options.functionKey,
      TLS_CERT_FILE: options.certFile,
      TLS_KEY_FILE: options.keyFile,
    },
  });
  const logs: string[] = [];
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const onExit = () => child.kill("SIGKILL");
  process.once("exit", onExit);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the function host did not start in 30 s:\n${stderr}`)), 30_000);
    createInterface({ input: child.stdout }).on("line", (line) => {
      const ready = /^ready (https:\/\/\S+)$/.exec(line);
      if (ready?.[1]) {
        clearTimeout(timer);
        resolve(ready[1]);
      } else {
        logs.push(line);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`the function host exited:\n${stderr}`));
    });
  });
  return {
    url,
    port: Number(new URL(url).port),
    logs,
    close: async () => {
      process.off("exit", onExit);
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** What the function host saw: TLS handshakes, and requests by method, path and header names. */
const Observation = t.union([t.type({ kind: t.literal("tlsHandshake") }), t.type({ kind: t.literal("request"), method: t.string, url: t.string, headers: t.array(t.string) })]);
export type Observation = t.TypeOf<typeof Observation>;

export function observations(host: FunctionHostProcess): Observation[] {
  return host.logs.flatMap((line) => {
    if (!line.startsWith("observed ")) return [];
    const decoded = Observation.decode(JSON.parse(line.slice("observed ".length)));
    if (isLeft(decoded)) throw new Error(`the function host reported an observation this test cannot read: ${line}`);
    return [decoded.right];
  });
}
