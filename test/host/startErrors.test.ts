import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";

/**
 * `npm start` refuses bad settings at once, naming the setting and what to do, with no stack
 * trace, and before it starts anything slow (a local control plane takes seconds to minutes).
 */
const Errors = suite("npm start with bad settings");

async function start(env: Record<string, string | undefined>): Promise<{ code: number | null; output: string; ms: number }> {
  const started = Date.now();
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "GMSA_CLUSTER_ACCESS", "GMSA_CLUSTERS", "TLS_CERT_FILE", "TLS_KEY_FILE", "PORT"]) delete base[name];
  const child = spawn("tsx", [join(__dirname, "..", "..", "host", "start.ts")], { env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  clearTimeout(timer);
  return { code, output, ms: Date.now() - started };
}

function assertPlain(output: string): void {
  assert.not.match(output, /^\s+at /m, `no stack trace:\n${output}`);
  assert.not.match(output, /starting a local control plane/, "nothing slow was started");
}

Errors("a KUBECONFIG file that does not exist is named, with what unsetting it does", async () => {
  const missing = join(mkdtempSync(join(tmpdir(), "gmsa-start-")), "kubeconfig");
  const result = await start({ KUBECONFIG: missing, PORT: "0" });
  assert.is(result.code, 1, result.output);
  assert.match(
    result.output,
    new RegExp(`gmsa-admission: KUBECONFIG names ${missing.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}, which does not exist: .*unset it to start a local cluster`),
  );
  assertPlain(result.output);
});

Errors("TLS_CERT_FILE without TLS_KEY_FILE is one line, no stack", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-start-"));
  writeFileSync(join(dir, "kubeconfig"), "apiVersion: v1\nkind: Config\n");
  const result = await start({ KUBECONFIG: join(dir, "kubeconfig"), TLS_CERT_FILE: join(dir, "tls.crt"), PORT: "0" });
  assert.is(result.code, 1, result.output);
  assert.match(result.output, /TLS_CERT_FILE and TLS_KEY_FILE go together/);
  assertPlain(result.output);
});

Errors("a PORT in use is named before a local control plane is started", async () => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
  try {
    const port = (busy.address() as AddressInfo).port;
    const result = await start({ PORT: String(port) });
    assert.is(result.code, 1, result.output);
    assert.match(result.output, new RegExp(`gmsa-admission: PORT ${port}: 127\\.0\\.0\\.1:${port} is already in use; set PORT to a free port`));
    assertPlain(result.output);
  } finally {
    busy.close();
  }
});

Errors("a fleet whose every member is out of service says loudly that nothing is served, and why for each", async () => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-start-"));
  const secret = "alpha-secret-0123456789abcdefghij".padEnd(40, "x");
  const child = spawn("tsx", [join(__dirname, "..", "..", "host", "start.ts")], {
    env: {
      ...process.env,
      KUBECONFIG: "",
      PORT: "0",
      XDG_CACHE_HOME: dir,
      GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: join(dir, "missing-kubeconfig") } }),
      GMSA_CLUSTER_SECRET_ALPHA: secret,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  try {
    const deadline = Date.now() + 60_000;
    while (!/NO CLUSTER IS SERVED[\s\S]*\n  alpha: /.test(output) && child.exitCode === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.match(output, /gmsa-admission ready for 0 clusters/);
    assert.match(output, /NO CLUSTER IS SERVED: every member of GMSA_CLUSTERS is kept out of service by its settings, so every admission is refused with 503:\n  alpha: /);
    assert.not.ok(output.includes(secret), "no secret is printed");
  } finally {
    // tsx passes SIGTERM on to the program it runs (a SIGKILL would leave that program running).
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
});

Errors.run();
