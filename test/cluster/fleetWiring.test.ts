import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import { clusterSecretSettingName } from "../../cluster/fleetMember.js";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { relayChecksumAnnotation, relayName, type RelayWiring } from "../../cluster/relay.js";
import { exitCodes, runWire } from "../../cluster/wire.js";
import { parseWireArguments, UsageError } from "../../cluster/wireArguments.js";

/**
 * `npm run wire -- --cluster NAME`: a fleet member's wiring. The webhooks reach the member's
 * paths, the secret rides where the API server or the relay can present it, and it is never shown.
 */
const secret = "S3cr3t-for-alpha_0123456789abcdefghij";
const otherSecret = "An0ther-secret-for-alpha_0123456789xyz";
const dir = mkdtempSync(join(tmpdir(), "gmsa-fleet-wire-"));
const secretFile = join(dir, "secret");
writeFileSync(secretFile, `${secret}\n`);
const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

const base = ["--function-url", "https://func-gmsa.azurewebsites.net", "--identity", "11111111-2222-3333-4444-555555555555"];
const relay = [...base, "--mode", "relay", "--function-key", "AbCdEfGhIjKlMnOp0123=="];
const url = [...base, "--mode", "url"];
const member = ["--cluster", "alpha", "--cluster-secret-file", secretFile];

function refusal(argv: readonly string[], env: Record<string, string> = {}): string {
  try {
    parseWireArguments(argv, env);
  } catch (error) {
    assert.instance(error, UsageError);
    return (error as Error).message;
  }
  return assert.unreachable("accepted") as never;
}

const Args = suite("wire --cluster arguments");

const refused: ReadonlyArray<readonly [string, readonly string[], Record<string, string>, RegExp]> = [
  ["a name that is no DNS label", [...relay, "--cluster", "Alpha_1", "--cluster-secret-file", secretFile, "--out", dir], {}, /--cluster: "Alpha_1" is not a member name/],
  ["a name that ends in a dash", [...relay, "--cluster", "alpha-", "--cluster-secret-file", secretFile, "--out", dir], {}, /is not a member name/],
  ["a name of 64 characters", [...relay, "--cluster", "a".repeat(64), "--cluster-secret-file", secretFile, "--out", dir], {}, /is not a member name/],
  ["a name that could break out of a path", [...relay, "--cluster", "alpha/../x", "--cluster-secret-file", secretFile, "--out", dir], {}, /is not a member name/],
  ["no secret", [...relay, "--cluster", "alpha", "--out", dir], {}, /--cluster alpha needs the member's secret \(the one in the function's GMSA_CLUSTER_SECRET_ALPHA\)/],
  ["an empty secret file", [...relay, "--cluster", "alpha", "--cluster-secret-file", file("empty", "\n"), "--out", dir], {}, /needs the member's secret/],
  ["a secret given twice", [...relay, ...member, "--out", dir], { GMSA_CLUSTER_SECRET: secret }, /give the cluster secret once/],
  ["a short secret", [...relay, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: "short-secret" }, /32 to 128 characters/],
  ["a secret of 129 characters", [...relay, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: "a".repeat(129) }, /32 to 128 characters/],
  ["a secret that could break the relay's config", [...relay, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: `${"a".repeat(32)}";evil` }, /32 to 128 characters/],
  ["a secret that could break out of the URL path", [...url, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: `${"a".repeat(32)}/../validate` }, /32 to 128 characters/],
  ["a secret of one repeated character", [...relay, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: "a".repeat(32) }, /at least 10 of them different/],
  ["a secret of two alternating characters", [...url, "--cluster", "alpha", "--out", dir], { GMSA_CLUSTER_SECRET: "ab".repeat(20) }, /at least 10 of them different/],
  [
    "the rotation pair",
    [...url, "--cluster", "alpha", "--out", dir],
    { GMSA_CLUSTER_SECRET: `${secret},${otherSecret}` },
    /is one secret: while rotating, GMSA_CLUSTER_SECRET_ALPHA holds "new,old"/,
  ],
  ["a missing secret file", [...relay, "--cluster", "alpha", "--cluster-secret-file", join(dir, "nope"), "--out", dir], {}, /--cluster-secret-file: cannot read/],
  ["a secret file without --cluster", [...relay, "--cluster-secret-file", secretFile], {}, /--cluster-secret-file goes with --cluster NAME/],
  [
    "rendering to stdout",
    [...relay, ...member],
    {},
    /--cluster alpha: the objects carry .*the cluster secret, so they are not printed: write them with --out DIR .* or --apply; --print-secrets/,
  ],
  ["--cluster with --uninstall", ["--uninstall", "--apply", "--cluster", "alpha"], {}, /--uninstall takes only/],
];

for (const [name, argv, env, message] of refused) {
  Args(`refuses ${name}`, () => {
    const text = refusal(argv, env);
    assert.match(text, message);
    for (const value of [secret, ...Object.values(env)]) assert.not.ok(value.length >= 12 && text.includes(value), "the message repeats no secret");
  });
}

Args("takes the secret from the file (trimmed) or from GMSA_CLUSTER_SECRET", () => {
  const fromFile = parseWireArguments([...relay, ...member, "--out", dir]);
  assert.ok(fromFile.action === "install");
  assert.equal(fromFile.action === "install" && fromFile.cluster, { name: "alpha", secret });
  const fromEnv = parseWireArguments([...url, "--cluster", "alpha-2", "--apply"], { GMSA_CLUSTER_SECRET: `${otherSecret}\n` });
  assert.equal(fromEnv.action === "install" && fromEnv.cluster, { name: "alpha-2", secret: otherSecret });
});

Args("without --cluster nothing changes: no member, whatever GMSA_CLUSTER_SECRET holds, and a notice that it is not used", () => {
  const plain = parseWireArguments([...relay, "--print-secrets"]);
  assert.ok(plain.action === "install" && plain.cluster === undefined && plain.notices === undefined);
  const withEnv = parseWireArguments([...relay, "--print-secrets"], { GMSA_CLUSTER_SECRET: secret });
  assert.ok(withEnv.action === "install" && withEnv.cluster === undefined);
  assert.equal(withEnv.action === "install" && withEnv.notices, [
    "GMSA_CLUSTER_SECRET is set but --cluster is not: wiring for a single-cluster Function App (today's paths, no cluster secret)\n",
  ]);
});

Args("the setting name is the member's name upper-cased with - as _", () => {
  assert.is(clusterSecretSettingName("west-eu-1"), "GMSA_CLUSTER_SECRET_WEST_EU_1");
  assert.is(clusterSecretSettingName("a"), "GMSA_CLUSTER_SECRET_A");
});

Args.run();

// ---------------------------------------------------------------------------------------

const certificate = { caPem: "-----CA-----\n", certPem: "-----CERT-----\n", keyPem: "-----KEY-----\n" };
const relayWiring: RelayWiring = { function: { host: "func-gmsa.azurewebsites.net", port: 443 }, functionKey: "k3y-AbCdEfGh1234567890==", certificate };

function render(cluster?: { name: string; secret: string }): KubernetesObject[] {
  return clusterManifests({ target: { kind: "relay", ...relayWiring, ...(cluster ? { cluster } : {}) }, subject: { kind: "User", name: "0000-identity" } });
}

function find(objects: KubernetesObject[], kind: string, name: string): any {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `${kind}/${name} is rendered`);
  return found;
}

const conf = (objects: KubernetesObject[]): string => find(objects, "ConfigMap", relayName).data["nginx.conf"];
const keySecret = (objects: KubernetesObject[]): Record<string, string> => find(objects, "Secret", `${relayName}-function-key`).data;
const checksum = (objects: KubernetesObject[]): string => find(objects, "Deployment", relayName).spec.template.metadata.annotations[relayChecksumAnnotation];

const Relay = suite("a fleet member's relay");

Relay("forwards each exact path to the member's path on the function, nothing else changes in the locations", () => {
  const single = conf(render());
  const fleet = conf(render({ name: "alpha", secret }));
  for (const path of ["/mutate", "/validate", "/validate-credspec"]) {
    assert.match(fleet, new RegExp(`location = ${path} \\{[^}]*proxy_pass https://gmsa_function/clusters/alpha${path}\\$function_query;`));
    assert.match(single, new RegExp(`location = ${path} \\{[^}]*proxy_pass https://gmsa_function${path}\\$function_query;`));
  }
  assert.not.match(fleet, /location [^=]*\/clusters/, "no prefix location: a path the API server did not send never reaches the member");
  assert.not.ok(fleet.includes(secret), "the secret is not in the ConfigMap");
  assert.not.match(single, /clusters|cluster-secret/);
});

Relay("adds the member's secret as x-gmsa-cluster-secret from its Secret, next to the function key", () => {
  const objects = render({ name: "alpha", secret });
  const data = keySecret(objects);
  assert.equal(Object.keys(data).sort(), ["cluster-secret.conf", "function-key.conf"]);
  assert.is(Buffer.from(data["cluster-secret.conf"]!, "base64").toString(), `proxy_set_header x-gmsa-cluster-secret "${secret}";\n`);
  assert.match(conf(objects), /include \/etc\/nginx\/relay-function-key\/function-key\.conf;\n\s+include \/etc\/nginx\/relay-function-key\/cluster-secret\.conf;\n/);
  assert.equal(Object.keys(keySecret(render())), ["function-key.conf"]);
});

Relay("a new secret or another member restarts the relay's pods; the same one does not", () => {
  const alpha = checksum(render({ name: "alpha", secret }));
  assert.is.not(checksum(render()), alpha);
  assert.is(checksum(render({ name: "alpha", secret })), alpha);
  assert.is.not(checksum(render({ name: "alpha", secret: otherSecret })), alpha);
  assert.is.not(checksum(render({ name: "beta", secret })), alpha);
});

Relay("the webhook configurations still address the relay's service on today's paths", () => {
  const objects = render({ name: "alpha", secret });
  const paths = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"].flatMap((kind) =>
    find(objects, kind, "gmsa-admission").webhooks.map((w: any) => w.clientConfig.service.path),
  );
  assert.equal(paths, ["/mutate", "/validate", "/validate-credspec"]);
});

Relay.run();

// ---------------------------------------------------------------------------------------

async function wire(argv: string[], env: Record<string, string> = {}) {
  let stdout = "";
  let stderr = "";
  const code = await runWire(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), kubeConfig: () => assert.unreachable("no cluster is contacted") as never, env });
  return { code, stdout, stderr };
}

function written(out: string): Array<{ file: string; mode: number; object: any }> {
  return readdirSync(out)
    .sort()
    .map((name) => ({ file: name, mode: statSync(join(out, name)).mode & 0o777, object: parse(readFileSync(join(out, name), "utf8")) }));
}

const Command = suite("wire --cluster rendering");

Command("url mode: every webhook calls /clusters/NAME/SECRET/<path>; those files are readable by their owner only", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "gmsa-fleet-out-")), "objects");
  const run = await wire([...url, ...member, "--out", out]);
  assert.is(run.code, exitCodes.ok, run.stderr);
  assert.is(run.stdout, "");
  assert.not.ok(run.stderr.includes(secret));
  const files = written(out);
  const webhooks = files.filter((f) => f.object.kind.endsWith("WebhookConfiguration"));
  assert.equal(
    webhooks.flatMap((f) => f.object.webhooks.map((w: any) => w.clientConfig.url)),
    ["/mutate", "/validate", "/validate-credspec"].map((path) => `https://func-gmsa.azurewebsites.net/clusters/alpha/${secret}${path}`),
  );
  for (const f of webhooks) assert.is(f.mode, 0o600, f.file);
  for (const f of files.filter((f) => !f.object.kind.endsWith("WebhookConfiguration"))) {
    assert.is(f.mode, 0o644, f.file);
    assert.not.ok(JSON.stringify(f.object).includes(secret), `${f.file} holds no secret`);
  }
});

Command(
  "url mode with --cluster warns that the API server shows the secret to the cluster's users when a call fails, and recommends relay wiring; relay mode does not",
  async () => {
    const out = join(mkdtempSync(join(tmpdir(), "gmsa-fleet-out-")), "objects");
    const urlRun = await wire([...url, ...member, "--out", out]);
    assert.is(urlRun.code, exitCodes.ok, urlRun.stderr);
    assert.match(
      urlRun.stderr,
      /warning: url wiring puts the secret of cluster "alpha" in its webhook URLs, and the API server quotes those URLs, secret included, in the error it returns to whoever creates a pod and in FailedCreate events/,
    );
    assert.match(urlRun.stderr, /For a fleet whose members do not trust each other, wire every member with --mode relay/);
    assert.match(urlRun.stderr, /After any outage of the function, rotate this member's secret/);
    assert.not.ok(urlRun.stderr.includes(secret), "the warning names the member, not its secret");
    const relayRun = await wire([...relay, ...member, "--out", join(mkdtempSync(join(tmpdir(), "gmsa-fleet-out-")), "objects")]);
    assert.is(relayRun.code, exitCodes.ok, relayRun.stderr);
    assert.not.match(relayRun.stderr, /url wiring puts the secret/);
    const single = await wire(url);
    assert.not.match(single.stderr, /url wiring puts the secret/, "a single cluster's url wiring carries no secret");
  },
);

Command("url mode without --cluster: today's URLs, byte for byte the same objects whatever GMSA_CLUSTER_SECRET holds", async () => {
  const plain = await wire(url);
  const withEnv = await wire(url, { GMSA_CLUSTER_SECRET: secret });
  assert.is(plain.code, exitCodes.ok);
  assert.is(withEnv.stdout, plain.stdout);
  assert.match(plain.stdout, /url: https:\/\/func-gmsa\.azurewebsites\.net\/mutate\n/);
  assert.is(plain.stderr, "");
  assert.match(withEnv.stderr, /GMSA_CLUSTER_SECRET is set but --cluster is not/);
});

Command("relay mode: the Secret carries the member's header; no other file holds the secret", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "gmsa-fleet-out-")), "objects");
  const run = await wire([...relay, "--cluster", "alpha"], { GMSA_CLUSTER_SECRET: secret });
  assert.is(run.code, exitCodes.usage, "not to stdout");
  const written2 = await wire([...relay, "--cluster", "alpha", "--out", out], { GMSA_CLUSTER_SECRET: secret });
  assert.is(written2.code, exitCodes.ok, written2.stderr);
  for (const f of written(out)) {
    const carries = JSON.stringify(f.object).includes(Buffer.from(`proxy_set_header x-gmsa-cluster-secret "${secret}";\n`).toString("base64"));
    assert.is(carries, f.object.kind === "Secret" && f.object.metadata.name === `${relayName}-function-key`, f.file);
    assert.not.ok(JSON.stringify(f.object).includes(secret), `${f.file} holds no secret in clear`);
    if (carries) assert.is(f.mode, 0o600);
  }
});

Command.run();
