import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { SourceMap } from "node:module";
import { dirname, join } from "node:path";
import { unzipSync } from "fflate";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { assertAscii, bundleWrapper, packageApp, packageDir } from "../../scripts/package.js";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { startFakeApiServer, type FakeApiServer } from "../support/fakeApiServer.js";
import { credSpecFixture } from "../support/fixtures.js";
import { gmsa, pod, review } from "../support/reviews.js";

/** The deployment package, unpacked and loaded as a cold start does, serves an admission. */
const Package = suite<{ dir: string; api: FakeApiServer; zipBytes: number; zipPath: string }>("deployment package");

Package.before(async (context) => {
  try {
    const { zipPath, zipBytes } = await packageApp();
    context.zipBytes = zipBytes;
    context.zipPath = zipPath;
    context.dir = mkdtempSync(join(tmpdir(), "gmsa-package-"));
    for (const [name, bytes] of Object.entries(unzipSync(readFileSync(zipPath)))) {
      mkdirSync(dirname(join(context.dir, name)), { recursive: true });
      writeFileSync(join(context.dir, name), bytes);
    }
    context.api = await startFakeApiServer();
    const spec = credSpecFixture("webapp1-credspec");
    context.api.state.credSpecs.set(spec.metadata.name, spec as unknown as Record<string, unknown>);
    // Mutate inlines contents only for a service account that may use them.
    context.api.state.grants = new Set([`system:serviceaccount:apps:default|${spec.metadata.name}`]);
  } catch (error) {
    console.error("package set-up failed:", error);
    throw error;
  }
});

Package.after(async (context) => {
  await context.api?.close();
});

// Asynchronous: the fake API server answering the child lives in this process.
async function coldStart(context: { dir: string; api: FakeApiServer }, fn: string, body: unknown, env: Record<string, string> = {}, params: Record<string, string> = {}) {
  let request = JSON.stringify({ body: JSON.stringify(body), params });
  if (request.length > 64 * 1024) {
    // Past what a command line holds: the driver reads it from a file.
    const file = join(mkdtempSync(join(tmpdir(), "gmsa-request-")), "request.json");
    writeFileSync(file, request);
    request = `@${file}`;
  }
  const { stdout: output } = await promisify(execFile)(process.execPath, [join(__dirname, "coldStartDriver.js"), context.dir, fn, request], {
    env: { PATH: process.env.PATH, KUBECONFIG: context.api.kubeconfig, GMSA_CREDSPEC_CACHE: "false", ...env },
    encoding: "utf8",
  });
  // The app's own log lines (a cache that has listed says so) may come first.
  return JSON.parse(output.slice(Math.max(0, output.indexOf('{"loadedMs"')))) as {
    loadedMs: number;
    codeCache: string;
    registered: Array<{ name: string; route?: string; methods?: string[]; authLevel?: string; schedule?: string }>;
    response: { status: number; body: string };
    second?: { status: number; body: string };
  };
}

Package("holds only the bundle, host.json and a manifest without dependencies or scripts", (context) => {
  const manifest = JSON.parse(readFileSync(join(context.dir, "package.json"), "utf8"));
  assert.is(manifest.main, "dist/functions/main.js");
  assert.equal(JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8")).main, manifest.main, "azd and the zip load the same entry");
  assert.equal(manifest.dependencies, {});
  assert.is(manifest.scripts, undefined, "nothing for a build service to run");
  assert.is(manifest.devDependencies, undefined);
  assert.equal(JSON.parse(readFileSync(join(context.dir, "host.json"), "utf8")).extensions.http.routePrefix, "");
  assert.ok(context.zipBytes < 5 * 1024 * 1024, `${context.zipBytes} bytes`);
});

Package("the folder azd zips (azure.yaml dist) holds exactly the zip's files, byte for byte", (context) => {
  const zipped = unzipSync(readFileSync(context.zipPath));
  const listed = (dir: string, under = ""): string[] =>
    readdirSync(join(dir, under), { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? listed(dir, join(under, entry.name)) : [join(under, entry.name)]));
  assert.equal(listed(packageDir).sort(), Object.keys(zipped).sort());
  for (const [name, bytes] of Object.entries(zipped)) assert.ok(Buffer.from(bytes).equals(readFileSync(join(packageDir, name))), name);
});

// The reporter that words decode errors is required on the first error (lib/admission/decodeErrors.ts).
Package("answers a malformed review with the decoder's words", async (context) => {
  const result = await coldStart(context, "validate", { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: 7 } });
  assert.is(result.response.status, 400);
  assert.match(result.response.body, /request\.uid/);
  assert.match(result.response.body, /Expecting string/);
});

// The credential spec cache lists and watches through the bundle's client: the second admission
// of the same spec makes no API call.
Package("fills the credential spec cache after the first admission and answers the next from it", async (context) => {
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  const before = context.api.calls.length;
  const result = await coldStart(context, "mutate", review("CREATE", p), { GMSA_CREDSPEC_CACHE: "true", THEN_WHEN_SYNCED: "1" });
  const first = JSON.parse(result.response.body).response;
  const second = JSON.parse(result.second?.body ?? "{}").response;
  assert.ok(first.patch, result.response.body);
  assert.is(second?.patch, first.patch, result.second?.body);
  const made = context.api.calls.slice(before).map((c) => `${c.method} ${c.path}${/watch=(1|true)/.test(c.search) ? " watch" : ""}`);
  const spec = "GET /apis/windows.k8s.io/v1/gmsacredentialspecs/webapp1-credspec";
  const list = "GET /apis/windows.k8s.io/v1/gmsacredentialspecs";
  assert.is(made.filter((c) => c === spec).length, 1, made.join("\n"));
  assert.ok(made.indexOf(list) > made.indexOf(spec), made.join("\n"));
  assert.ok(
    made.some((c) => c === `${list} watch`),
    made.join("\n"),
  );
  assert.is(made.filter((c) => c.startsWith("POST")).length, 1, made.join("\n"));
});

/** The fake API server's kubeconfig, changed by `edit`, in a file of its own. */
function editedKubeconfig(
  context: { api: FakeApiServer },
  edit: (config: { clusters: Array<{ cluster: Record<string, unknown> }>; users: Array<{ user: Record<string, unknown> }> }) => void,
): string {
  const config = JSON.parse(readFileSync(context.api.kubeconfig, "utf8"));
  edit(config);
  const file = join(mkdtempSync(join(tmpdir(), "gmsa-kubeconfig-")), "kubeconfig");
  writeFileSync(file, JSON.stringify(config));
  return file;
}

// A kubeconfig that names an exec credential plugin runs it from the bundle.
Package("runs the exec credential plugin a kubeconfig names, and calls the API server with its token", async (context) => {
  const dir = mkdtempSync(join(tmpdir(), "gmsa-exec-plugin-"));
  const plugin = join(dir, "plugin.js");
  const ran = join(dir, "ran");
  writeFileSync(
    plugin,
    `require("node:fs").writeFileSync(${JSON.stringify(ran)}, "yes");\nprocess.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: "from-the-exec-plugin" } }));\n`,
  );
  const kubeconfig = editedKubeconfig(context, (config) => {
    config.users[0]!.user = { exec: { apiVersion: "client.authentication.k8s.io/v1", command: process.execPath, args: [plugin], interactiveMode: "Never" } };
  });
  const before = context.api.calls.length;
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  const result = await coldStart(context, "mutate", review("CREATE", p), { KUBECONFIG: kubeconfig });
  assert.is(result.response.status, 200);
  assert.ok(JSON.parse(result.response.body).response.patch, result.response.body);
  assert.is(readFileSync(ran, "utf8"), "yes");
  const made = context.api.calls.slice(before);
  assert.ok(made.length > 0 && made.every((c) => c.authorization === "Bearer from-the-exec-plugin"), JSON.stringify(made.map((c) => c.authorization)));
});

// A kubeconfig's SOCKS proxy-url is honoured from the bundle.
Package("reaches the API server through the SOCKS proxy a kubeconfig names", async (context) => {
  const greetings: Buffer[] = [];
  const proxy = createServer((socket) => socket.once("data", (data: Buffer) => (greetings.push(data), socket.destroy())));
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const port = (proxy.address() as AddressInfo).port;
    const kubeconfig = editedKubeconfig(context, (config) => {
      config.clusters[0]!.cluster["proxy-url"] = `socks5://127.0.0.1:${port}`;
    });
    const p = pod();
    p.spec.securityContext = gmsa("webapp1-credspec");
    const result = await coldStart(context, "mutate", review("CREATE", p), { KUBECONFIG: kubeconfig });
    // The proxy hangs up: no access review, so nothing is inlined.
    assert.is(JSON.parse(result.response.body).response.patch, undefined, result.response.body);
    assert.ok(greetings.length > 0, "the proxy was never reached");
    assert.is(greetings[0]![0], 5, "a SOCKS5 greeting");
  } finally {
    proxy.close();
  }
});

Package("registers every function with its route, and serves a mutate from a cold start", async (context) => {
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  const result = await coldStart(context, "mutate", review("CREATE", p));
  const webhooks = ["mutate", "validate", "validate-credspec"];
  assert.equal(
    result.registered.flatMap((r) => (r.route === undefined ? [] : [r.route])).sort(),
    ["health", "info", "metrics", ...webhooks, ...webhooks.flatMap((w) => [`clusters/{cluster}/${w}`, `clusters/{cluster}/{secret}/${w}`])].sort(),
  );
  // The canary: a timer, every five minutes unless GMSA_CANARY_SCHEDULE says otherwise.
  assert.equal(
    result.registered.filter((r) => r.route === undefined),
    [{ name: "canary", schedule: "0 */5 * * * *" }],
  );
  assert.is(result.registered.find((r) => r.name === "mutate")?.authLevel, "anonymous");
  assert.is(result.response.status, 200);
  const answer = JSON.parse(result.response.body).response;
  assert.ok(answer.patch, JSON.stringify(answer));
  const ops = JSON.parse(Buffer.from(answer.patch, "base64").toString());
  assert.is(ops[0].value, canonicalJson(credSpecFixture("webapp1-credspec").credspec));
  console.log(`  package loaded in ${result.loadedMs.toFixed(0)} ms`);
});

Package("a body over the limit is answered 413 through the package's own request", async (context) => {
  const result = await coldStart(context, "mutate", { pad: "x".repeat(3 * 1024 * 1024) });
  assert.is(result.response.status, 413);
});

Package("with GMSA_CLUSTERS, serves a member on its path with its secret, and today's paths no more", async (context) => {
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  const secret = "alpha-secret-0123456789".padEnd(40, "s");
  const fleet = { GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig: context.api.kubeconfig } }), GMSA_CLUSTER_SECRET_ALPHA: secret, KUBECONFIG: "" };
  const served = await coldStart(context, "cluster-secret-mutate", review("CREATE", p), fleet, { cluster: "alpha", secret });
  assert.is(served.response.status, 200);
  assert.ok(JSON.parse(served.response.body).response.patch, served.response.body);
  const wrong = await coldStart(context, "cluster-secret-mutate", review("CREATE", p), fleet, { cluster: "alpha", secret: "alpha-secret-9876543210".padEnd(40, "t") });
  assert.is(wrong.response.status, 401);
  const top = await coldStart(context, "mutate", review("CREATE", p), fleet);
  assert.is(top.response.status, 404);
});

Package("compiles the bundle from its V8 code cache, and serves the same without a cache V8 takes", async (context) => {
  const p = pod();
  p.spec.securityContext = gmsa("webapp1-credspec");
  const cached = await coldStart(context, "mutate", review("CREATE", p));
  assert.is(cached.codeCache, "used", "the Node that built the package takes its cache");
  // Another Node release, or a damaged file: V8 refuses the cache and the bundle compiles as usual.
  const damaged = join(mkdtempSync(join(tmpdir(), "gmsa-package-")), "app");
  cpSync(context.dir, damaged, { recursive: true });
  const cache = join(damaged, "dist", "functions", "app.js.v8cache");
  const bytes = readFileSync(cache);
  bytes.fill(0, 0, 64);
  writeFileSync(cache, bytes);
  const uncached = await coldStart({ ...context, dir: damaged }, "mutate", review("CREATE", p));
  assert.is(uncached.codeCache, "rejected");
  for (const result of [cached, uncached]) {
    const ops = JSON.parse(Buffer.from(JSON.parse(result.response.body).response.patch, "base64").toString());
    assert.is(ops[0].value, canonicalJson(credSpecFixture("webapp1-credspec").credspec));
  }
});

Package("the code cache was made after a first admission, and holds more than loading alone compiles", async (context) => {
  const trained = readFileSync(join(context.dir, "dist", "functions", "app.js.v8cache")).byteLength;
  // The same package, its cache made by loading only (no review handed to the cache maker).
  const copy = join(mkdtempSync(join(tmpdir(), "gmsa-package-")), "app");
  cpSync(context.dir, copy, { recursive: true });
  // Without the shipped cache: V8 would hand every function it holds to the new one.
  rmSync(join(copy, "dist", "functions", "app.js.v8cache"));
  await promisify(execFile)(process.execPath, [join(__dirname, "..", "..", "scripts", "packageCodeCache.js"), join(copy, "dist", "functions", "main.js")], {
    env: { PATH: process.env.PATH },
  });
  const loadedOnly = readFileSync(join(copy, "dist", "functions", "app.js.v8cache")).byteLength;
  rmSync(dirname(copy), { recursive: true, force: true });
  assert.ok(trained > loadedOnly * 1.05, `trained ${trained} bytes, loading only ${loadedOnly}`);
});

Package("V8 runs the bundle's text as read, outside its heap, and the map still points each line of app.js at its source", async (context) => {
  const app = join(context.dir, "dist", "functions", "app.js");
  const text = readFileSync(app, "latin1");
  assert.ok(text.startsWith(`${bundleWrapper.head}\n`), "app.js opens with the module wrapper on a line of its own");
  // Loaded as the worker loads it, the script's source is the string read from the file: no copy
  // with a wrapper added lives in V8's heap.
  const probe = `
    const v8 = require("node:v8");
    const { requireMain, standInCore } = require(${JSON.stringify(join(__dirname, "..", "..", "scripts", "workerStandIn.js"))});
    standInCore();
    const before = v8.getHeapCodeStatistics().external_script_source_size;
    requireMain(${JSON.stringify(context.dir)});
    process.stdout.write(String(v8.getHeapCodeStatistics().external_script_source_size - before));
    process.exit(0);`;
  const { stdout } = await promisify(execFile)(process.execPath, ["-e", probe], { env: { PATH: process.env.PATH, KUBECONFIG: context.api.kubeconfig } });
  assert.ok(Number(stdout) >= text.length, `the script sources outside the heap grew by ${stdout} bytes; app.js has ${text.length}`);
  // A message of our own, found in app.js, maps back to the line of the source that writes it.
  const map = new SourceMap(JSON.parse(readFileSync(`${app}.map`, "utf8")));
  const lines = text.split("\n");
  const line = lines.findIndex((l) => l.includes("admission budget of "));
  assert.ok(line > 0, "the deadline's message is in the bundle");
  const entry = map.findEntry(line, lines[line]!.indexOf("admission budget of "));
  assert.ok("originalSource" in entry && entry.originalSource.endsWith("lib/admission/deadline.ts"), JSON.stringify(entry));
  const original = readFileSync(join(__dirname, "..", "..", "lib", "admission", "deadline.ts"), "utf8").split("\n");
  assert.ok(original[entry.originalLine]!.includes("admission budget of "), original[entry.originalLine]);
});

Package("packaging refuses a bundle with a byte past ASCII, and says where", () => {
  assertAscii(Buffer.from("const pattern = /(us|\\u00b5s)/;"));
  assert.throws(() => assertAscii(Buffer.from("const pattern = /(us|\u00b5s)/;", "utf8")), /not ASCII at byte 21, in .*const pattern = \/\(us\|/);
});

Package("asks for function keys when the app setting says so", async (context) => {
  const result = await coldStart(context, "validate", review("CREATE", pod()), { GMSA_REQUIRE_FUNCTION_KEY: "true" });
  assert.is(result.registered.find((r) => r.name === "validate")?.authLevel, "function");
  assert.is(result.registered.find((r) => r.name === "health")?.authLevel, "anonymous");
});

// The entry point is loaded once more with these settings; it must register nothing and name the setting.
async function failedLoad(context: { dir: string; api: FakeApiServer }, env: Record<string, string>): Promise<{ loadError: string; registered: string[] }> {
  const loaded = await coldStart(context, "validate", review("CREATE", pod()), env).then(
    () => undefined,
    (error: unknown) => error as { code?: number; stdout?: string },
  );
  if (loaded === undefined) assert.unreachable(`the entry point loaded with ${JSON.stringify(env)}`);
  assert.is(loaded?.code, 3, `the driver failed otherwise: ${JSON.stringify(loaded)}`);
  return JSON.parse(loaded?.stdout ?? "") as { loadError: string; registered: string[] };
}

Package("reads the function-key setting with the same codec as every other setting", async (context) => {
  for (const value of ["1", " true", "true ", "TRUE"]) {
    const result = await coldStart(context, "validate", review("CREATE", pod()), { GMSA_REQUIRE_FUNCTION_KEY: value });
    for (const name of ["mutate", "validate", "metrics"]) {
      assert.is(result.registered.find((r) => r.name === name)?.authLevel, "function", `${name} with ${JSON.stringify(value)}`);
    }
  }
});

Package("a misspelt function-key setting registers no function and names the setting", async (context) => {
  for (const value of ["ture", "yes", "on"]) {
    const { loadError, registered } = await failedLoad(context, { GMSA_REQUIRE_FUNCTION_KEY: value });
    assert.match(loadError, /GMSA_REQUIRE_FUNCTION_KEY must be true or false/);
    assert.equal(registered, [], `registered with ${JSON.stringify(value)}`);
  }
});

Package("public network mode refuses to load without function keys", async (context) => {
  const keyless: Array<Record<string, string>> = [
    { GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay" },
    { GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "false" },
  ];
  for (const env of keyless) {
    const { loadError, registered } = await failedLoad(context, env);
    assert.match(loadError, /GMSA_NETWORK_MODE=public needs GMSA_REQUIRE_FUNCTION_KEY=true/);
    assert.equal(registered, []);
  }
  const { loadError } = await failedLoad(context, { GMSA_NETWORK_MODE: "internet" });
  assert.match(loadError, /GMSA_NETWORK_MODE must be one of public, private/);
  const unsaid = await failedLoad(context, { WEBSITE_SITE_NAME: "func-gmsa-abc" });
  assert.match(unsaid.loadError, /GMSA_NETWORK_MODE must be public or private on a Function App/);
  assert.equal(unsaid.registered, []);
  const keyed = await coldStart(context, "validate", review("CREATE", pod()), { GMSA_NETWORK_MODE: "public", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" });
  assert.is(keyed.registered.find((r) => r.name === "validate")?.authLevel, "function");
  const privateMode = await coldStart(context, "validate", review("CREATE", pod()), { GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "url", GMSA_REQUIRE_FUNCTION_KEY: "false" });
  assert.is(privateMode.registered.find((r) => r.name === "validate")?.authLevel, "anonymous");
});

Package("private mode behind the relay refuses to load without function keys; with them every webhook asks for one", async (context) => {
  const keyless: Array<Record<string, string>> = [
    { WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "false" },
    { GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay" },
  ];
  for (const env of keyless) {
    const { loadError, registered } = await failedLoad(context, env);
    assert.match(loadError, /GMSA_WIRING_MODE=relay needs GMSA_REQUIRE_FUNCTION_KEY=true/);
    assert.equal(registered, [], JSON.stringify(env));
  }
  const unsaid = await failedLoad(context, { WEBSITE_SITE_NAME: "func-gmsa-abc", GMSA_NETWORK_MODE: "private", GMSA_REQUIRE_FUNCTION_KEY: "false" });
  assert.match(unsaid.loadError, /GMSA_WIRING_MODE \(url or relay\) go together/);
  assert.equal(unsaid.registered, []);
  const keyed = await coldStart(context, "validate", review("CREATE", pod()), { GMSA_NETWORK_MODE: "private", GMSA_WIRING_MODE: "relay", GMSA_REQUIRE_FUNCTION_KEY: "true" });
  for (const name of ["mutate", "validate", "metrics"]) assert.is(keyed.registered.find((r) => r.name === name)?.authLevel, "function", name);
});

Package("on a Node.js release older than the engines floor the app loads no function, and names the release it needs", async (context) => {
  const older = { NODE_OPTIONS: `--require ${join(__dirname, "olderNode.js")}`, OLDER_NODE_VERSION: "v22.18.0" };
  const { loadError, registered } = await failedLoad(context, older);
  assert.match(loadError, /gmsa-admission needs Node\.js 22\.19\.0 or later \(engines >=22\.19 <23\); this is v22\.18\.0/);
  assert.equal(registered, []);
  const current = await coldStart(context, "validate", review("CREATE", pod()), { ...older, OLDER_NODE_VERSION: "v22.19.0" });
  assert.is(current.response.status, 200);
});

Package("a bad setting stops the app at start", async (context) => {
  try {
    await coldStart(context, "mutate", review("CREATE", pod()), { GMSA_API_TIMEOUT_MS: "soon" });
    assert.unreachable("should have failed");
  } catch (error) {
    assert.match(String((error as { stderr?: string }).stderr), /GMSA_API_TIMEOUT_MS must be a whole number/);
  }
});

Package.run();
