import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments } from "yaml";
import { issueRelayCertificate } from "../../cluster/relayCertificate.js";
import { parseWireArguments, UsageError } from "../../cluster/wireArguments.js";
import { exitCodes, runWire } from "../../cluster/wire.js";

/** The wiring command's arguments: bad input is a clear message and exit 2, before any cluster. */
const dir = mkdtempSync(join(tmpdir(), "gmsa-wire-args-"));
const keyFile = join(dir, "key");
writeFileSync(keyFile, "AbCdEfGhIjKlMnOp0123==\n");
const emptyKeyFile = join(dir, "empty");
writeFileSync(emptyKeyFile, "\n");
const caFile = join(dir, "ca.crt");
const brokenCaFile = join(dir, "broken.crt");
writeFileSync(brokenCaFile, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
/** A certificate and its private key in one PEM file, as some tools write them. */
const certAndKeyFile = join(dir, "combined.pem");
let caPem = "";
let keyPem = "";

const url = ["--function-url", "https://func-gmsa.azurewebsites.net"];
const relay = [...url, "--mode", "relay", "--identity", "11111111-2222-3333-4444-555555555555", "--function-key", "AbCdEfGhIjKlMnOp0123==", "--print-secrets"];
const urlMode = [...url, "--mode", "url", "--identity", "11111111-2222-3333-4444-555555555555"];

const refused: ReadonlyArray<readonly [string, readonly string[], RegExp]> = [
  ["an unknown option", [...relay, "--colour"], /Unknown option '--colour'/],
  ["no mode", [...url, "--identity", "x"], /--mode is required/],
  ["an unknown mode", [...url, "--mode", "direct", "--identity", "x"], /--mode must be url or relay/],
  ["no function URL", ["--mode", "url", "--identity", "x"], /--function-url is required/],
  ["plain http", ["--function-url", "http://func.azurewebsites.net", "--mode", "url", "--identity", "x"], /must be https/],
  ["a query string (a key in ?code=)", ["--function-url", "https://func.azurewebsites.net?code=abc", "--mode", "url", "--identity", "x"], /no query string/],
  ["an empty query string", ["--function-url", "https://func.azurewebsites.net/?", "--mode", "url", "--identity", "x"], /no query string/],
  ["a fragment", ["--function-url", "https://func.azurewebsites.net#x", "--mode", "url", "--identity", "x"], /no fragment/],
  ["a path", ["--function-url", "https://func.azurewebsites.net/mutate", "--mode", "url", "--identity", "x"], /without a path/],
  ["credentials in the URL", ["--function-url", "https://me:pw@func.azurewebsites.net", "--mode", "url", "--identity", "x"], /no user or password/],
  ["not a URL", ["--function-url", "func.azurewebsites.net", "--mode", "url", "--identity", "x"], /not a URL/],
  ["an IP address in relay mode", ["--function-url", "https://10.1.2.3", "--mode", "relay", "--identity", "x", "--function-key", "AbCdEfGhIjKlMnOp0123=="], /addressed by name/],
  ["no identity", [...url, "--mode", "url"], /--identity is required/],
  ["an empty identity", [...url, "--mode", "url", "--identity", " "], /--identity is required/],
  ["relay mode without a key", [...url, "--mode", "relay", "--identity", "x"], /relay mode needs the function key/],
  ["relay mode with an empty key file", [...url, "--mode", "relay", "--identity", "x", "--function-key-file", emptyKeyFile], /relay mode needs the function key/],
  ["a key that could break the relay's config", [...url, "--mode", "relay", "--identity", "x", "--function-key", 'abcdefghijklmnop";evil'], /16 to 512 characters/],
  ["a short key", [...url, "--mode", "relay", "--identity", "x", "--function-key", "short"], /16 to 512 characters/],
  ["both key options", [...relay, "--function-key-file", keyFile], /give the function key once/],
  ["a missing key file", [...url, "--mode", "relay", "--identity", "x", "--function-key-file", join(dir, "nope")], /cannot read/],
  ["a key in url mode", [...urlMode, "--function-key", "AbCdEfGhIjKlMnOp0123=="], /url mode sends no function key/],
  ["a CA bundle in relay mode", [...relay, "--ca-bundle-file", caFile], /--ca-bundle-file is for url mode/],
  ["a CA bundle that is no PEM", [...urlMode, "--ca-bundle-file", keyFile], /--ca-bundle-file: the CA is neither PEM nor base64 of PEM/],
  ["a CA bundle whose certificate does not parse", [...urlMode, "--ca-bundle-file", brokenCaFile], /--ca-bundle-file: certificate 1 of the CA bundle does not parse/],
  ["a rollout timeout of 0", [...relay, "--rollout-timeout-seconds", "0"], /--rollout-timeout-seconds must be a whole number from 1 to 3600/],
  ["a rollout timeout in url mode", [...urlMode, "--rollout-timeout-seconds", "60"], /--rollout-timeout-seconds is for relay mode/],
  ["--adopt-namespace without --apply", [...relay, "--adopt-namespace"], /--adopt-namespace goes with --apply/],
  ["--adopt-namespace in url mode", [...urlMode, "--adopt-namespace", "--apply"], /--adopt-namespace is for relay mode/],
  ["a timeout of 0", [...relay, "--timeout-seconds", "0"], /from 1 to 30/],
  ["a timeout over 30", [...relay, "--timeout-seconds", "31"], /from 1 to 30/],
  ["a timeout that is no number", [...relay, "--timeout-seconds", "5s"], /from 1 to 30/],
  ["an invalid namespace", [...relay, "--namespace", "Gmsa_Admission"], /not a valid namespace name/],
  ["a shared namespace", [...relay, "--namespace", "kube-system"], /a namespace of its own/],
  ["--dry-run without --apply", [...relay, "--dry-run"], /--dry-run goes with --apply/],
  ["--uninstall with install options", ["--uninstall", "--apply", ...url], /--uninstall takes only/],
  ["--uninstall without --apply", ["--uninstall"], /add --apply/],
  ["relay options in url mode", [...urlMode, "--relay-image", "nginx:1"], /--relay-image is for relay mode/],
  ["a resolver that could break the config", [...relay, "--relay-resolver", "1.2.3.4; evil"], /not a host name or address/],
  ["--rotate-certificate without --apply", [...relay, "--rotate-certificate"], /goes with --apply/],
  ["--relay-allow-from in url mode", [...urlMode, "--relay-allow-from", "konnectivity"], /--relay-allow-from is for relay mode/],
  ["an unknown allowed source", [...relay, "--relay-allow-from", "kube-system"], /--relay-allow-from: "kube-system" is neither "konnectivity" nor a CIDR/],
  ["an address without a prefix", [...relay, "--relay-allow-from", "10.1.2.0"], /neither "konnectivity" nor a CIDR/],
  ["a CIDR with host bits", [...relay, "--relay-allow-from", "10.1.2.5/28"], /host bits set/],
  ["an IPv6 CIDR with host bits", [...relay, "--relay-allow-from", "fd00::1/120"], /host bits set/],
  ["a prefix longer than the address", [...relay, "--relay-allow-from", "10.1.2.0/33"], /at most 32/],
  ["every address", [...relay, "--relay-allow-from", "0.0.0.0/0"], /allows every address/],
  ["every IPv6 address", [...relay, "--relay-allow-from", "::/0"], /allows every address/],
  ["an octet out of range", [...relay, "--relay-allow-from", "10.1.256.0/24"], /neither "konnectivity" nor a CIDR/],
  ["an empty entry", [...relay, "--relay-allow-from", "konnectivity,"], /empty entry/],
  ["an empty list", [...relay, "--relay-allow-from", ""], /empty entry/],
  ["a source given twice", [...relay, "--relay-allow-from", "10.1.0.0/28,10.1.0.0/28"], /given twice/],
  ["YAML smuggled into a source", [...relay, "--relay-allow-from", "10.1.0.0/16\n- ipBlock: {cidr: 0.0.0.0/0}"], /neither "konnectivity" nor a CIDR/],
];

const Args = suite("wire arguments");

Args.before(async () => {
  const issued = await issueRelayCertificate("test");
  caPem = issued.caPem;
  keyPem = issued.keyPem;
  writeFileSync(caFile, caPem);
  writeFileSync(certAndKeyFile, `${caPem}\n${keyPem}\n`);
});

for (const [name, argv, message] of refused) {
  Args(`refuses ${name}`, () => {
    try {
      parseWireArguments(argv);
      assert.unreachable("accepted");
    } catch (error) {
      assert.instance(error, UsageError);
      assert.match((error as Error).message, message);
    }
  });
}

Args("--check alone reads the cluster; after wiring it goes with --apply; its options go with it", () => {
  assert.equal(parseWireArguments(["--check"]), { action: "check", check: { namespace: "default", serviceAccount: "default", timeoutSeconds: 120 } });
  assert.equal(parseWireArguments(["--check", "--check-namespace", "apps", "--check-service-account", "web", "--check-timeout-seconds", "0"]), {
    action: "check",
    check: { namespace: "apps", serviceAccount: "web", timeoutSeconds: 0 },
  });
  const wired = parseWireArguments([...urlMode, "--apply", "--check"]);
  assert.ok(wired.action === "install" && wired.check?.namespace === "default");
  for (const [args, refusal] of [
    [["--check-namespace", "apps"], /go with --check/],
    [[...urlMode, "--check"], /--check after wiring needs --apply/],
    [[...urlMode, "--apply", "--dry-run", "--check"], /does not go with --dry-run/],
    [["--uninstall", "--apply", "--check"], /does not go with --uninstall/],
    [["--check", "--check-namespace", "kube-system"], /never run in kube-system/],
    [["--check", "--check-timeout-seconds", "601"], /--check-timeout-seconds/],
  ] as const) {
    assert.throws(
      () => parseWireArguments([...args]),
      (error: unknown) => error instanceof UsageError && refusal.test(error.message),
      args.join(" "),
    );
  }
});

Args("accepts relay mode with its defaults", () => {
  const request = parseWireArguments(relay);
  assert.is(request.action, "install");
  if (request.action !== "install") return;
  assert.is(request.mode, "relay");
  assert.equal(request.function, { host: "func-gmsa.azurewebsites.net", port: 443 });
  assert.is(request.functionUrl, "https://func-gmsa.azurewebsites.net");
  assert.is(request.timeoutSeconds, 5);
  assert.is(request.namespace, "gmsa-admission");
  assert.is(request.apply, false);
  assert.is(request.includeCrd, true);
  assert.equal(request.relayAllowFrom, [{ kind: "konnectivity" }]);
});

Args("--relay-allow-from takes konnectivity and CIDRs, IPv4 and IPv6, in the order given", () => {
  const request = parseWireArguments([...relay, "--relay-allow-from", "10.224.0.0/28, konnectivity,FD00:AB::100/120,192.168.1.7/32"]);
  assert.ok(request.action === "install");
  assert.equal(request.relayAllowFrom, [
    { kind: "cidr", cidr: "10.224.0.0/28" },
    { kind: "konnectivity" },
    { kind: "cidr", cidr: "fd00:ab::100/120" },
    { kind: "cidr", cidr: "192.168.1.7/32" },
  ]);
});

Args("accepts a trailing slash, a port, a key file and url mode with a CA bundle", () => {
  const fromFile = parseWireArguments(["--function-url", "https://Func.example.com:8443/", "--mode", "relay", "--identity", "x", "--function-key-file", keyFile, "--out", dir]);
  assert.ok(fromFile.action === "install" && fromFile.functionKey === "AbCdEfGhIjKlMnOp0123==");
  assert.ok(fromFile.action === "install" && fromFile.function.host === "func.example.com" && fromFile.function.port === 8443);
  const withCa = parseWireArguments([...urlMode, "--ca-bundle-file", caFile, "--timeout-seconds", "10", "--no-crd"]);
  assert.ok(withCa.action === "install" && withCa.caBundlePem?.includes("BEGIN CERTIFICATE") && withCa.timeoutSeconds === 10 && !withCa.includeCrd);
});

Args("a CA bundle file that also holds a private key: only the certificate is kept, and the key is said to be left out", async () => {
  const request = parseWireArguments([...urlMode, "--ca-bundle-file", certAndKeyFile]);
  assert.ok(request.action === "install");
  if (request.action !== "install") return;
  assert.is(request.caBundlePem, `${caPem}\n`);
  assert.equal(request.caBundleDropped, ["PRIVATE KEY"]);

  let stdout = "";
  let stderr = "";
  const code = await runWire([...urlMode, "--ca-bundle-file", certAndKeyFile], {
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    kubeConfig: () => assert.unreachable() as never,
  });
  assert.is(code, exitCodes.ok, stderr);
  assert.match(stderr, /--ca-bundle-file: left out 1 PEM block\(s\) that are not certificates \(PRIVATE KEY\)/);
  const keyBody = keyPem.split("\n")[1]!;
  assert.not.ok(stdout.includes(keyBody) || stdout.includes(Buffer.from(keyPem).toString("base64").slice(0, 40)), "no part of the key in the objects");
  const webhooks = parseAllDocuments(stdout)
    .map((d) => d.toJS())
    .filter((o) => o.kind.endsWith("WebhookConfiguration"));
  assert.is(webhooks.length, 2);
  for (const webhook of webhooks) {
    const bundle = Buffer.from(webhook.webhooks[0].clientConfig.caBundle, "base64").toString();
    assert.is(bundle, `${caPem}\n`);
    assert.not.match(bundle, /PRIVATE KEY/);
  }
});

Args("a plain CA bundle file goes through without a notice", async () => {
  let stderr = "";
  const code = await runWire([...urlMode, "--ca-bundle-file", caFile], { stdout: () => {}, stderr: (t) => (stderr += t), kubeConfig: () => assert.unreachable() as never });
  assert.is(code, exitCodes.ok, stderr);
  assert.is(stderr, "");
});

Args("bad input exits 2 with the reason on stderr, and never reads a kubeconfig", async () => {
  let stderr = "";
  let stdout = "";
  const code = await runWire(["--function-url", "https://f.example?code=1", "--mode", "url", "--identity", "x", "--apply"], {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    kubeConfig: () => assert.unreachable("a kubeconfig was read") as never,
  });
  assert.is(code, exitCodes.usage);
  assert.match(stderr, /^wire: --function-url must have no query string/);
  assert.is(stdout, "");
});

Args("--help prints the options and exits 0", async () => {
  let stdout = "";
  const code = await runWire(["--help"], { stdout: (text) => (stdout += text), stderr: () => {}, kubeConfig: () => assert.unreachable() as never });
  assert.is(code, exitCodes.ok);
  assert.match(stdout, /--function-url URL/);
  assert.match(stdout, /--uninstall/);
});

Args.run();
