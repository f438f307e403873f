import { KubeConfig } from "@kubernetes/client-node";
import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { safetyNetCredSpecObjects, safetyNetCredSpecPolicyName } from "../../lib/wiring/safetyNetCredSpecs.js";
import { checkCredSpec } from "../../lib/credspec/checkCredSpec.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { credSpecFile } from "../lib/credspec/credSpecFixtures.js";
import { refused, suspicious } from "../lib/credspec/credSpecVariants.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";

/**
 * The safety net's credential spec policy through a real kube-apiserver, with no webhook: every
 * spec the webhook's unit tests refuse is refused here too, at the same field and in the same
 * words; every spec they admit (with or without warnings) is admitted. Over random edits of
 * well-formed specs the policy never refuses what the webhook admits. The last test takes the
 * policy away and a refused spec goes through: the refusals were the policy's.
 */
interface Context {
  controlPlane?: ControlPlane;
  admin: KubeConfig;
  serial: number;
}

const CredSpecs = suite<Context>("the safety net's credential spec policy through a real API server", { serial: 0 } as Context);

const wellFormed = ["domain-joined.yaml", "aks-keyvault.yaml", "eks-domainless.yaml"];
const collection = "/apis/windows.k8s.io/v1/gmsacredentialspecs";

function specObject(context: Context, credspec: unknown): Record<string, unknown> {
  context.serial += 1;
  return { apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: `spec-${context.serial}` }, ...(credspec === undefined ? {} : { credspec }) };
}

const create = (context: Context, credspec: unknown): Promise<KubeReply> => kubeRequest(context.admin, "POST", collection, specObject(context, credspec));

function messageOf(reply: KubeReply): string {
  return (reply.body as { message?: string }).message ?? "";
}

CredSpecs.before(async (context) => {
  context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
  context.admin = new KubeConfig();
  context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
  await applyObjects(context.admin, [credSpecCrd() as KubernetesObject]);
  // The API server serves a new CRD's resource a moment after it is stored.
  await waitFor(async () => (await kubeRequest(context.admin, "GET", collection)).status === 200, "the CRD is not served");
  await applyObjects(context.admin, safetyNetCredSpecObjects() as KubernetesObject[]);
  await waitFor(async () => (await create(context, undefined)).status === 422, "the credential spec policy was not enforced");
});

CredSpecs.after(async (context) => {
  await context.controlPlane?.stop();
});

async function waitFor(condition: () => Promise<boolean>, failure: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${failure} within 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

CredSpecs("the policy compiled with no type-check warning", async (context) => {
  const policy = await kubeRequest(context.admin, "GET", `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${safetyNetCredSpecPolicyName}`);
  assert.is(policy.status, 200);
  const status = (policy.body as { status?: { typeChecking?: { expressionWarnings?: unknown[] } } }).status;
  assert.equal(status?.typeChecking?.expressionWarnings ?? [], [], JSON.stringify(status));
});

CredSpecs("well-formed specs, and specs the webhook only warns about, are admitted", async (context) => {
  for (const file of wellFormed) {
    const reply = await create(context, credSpecFile(file).credspec);
    assert.is(reply.status, 201, `${file}: ${messageOf(reply)}`);
  }
  for (const variant of suspicious) {
    const credspec = credSpecFile(variant.file ?? "domain-joined.yaml").credspec;
    variant.edit(credspec);
    const reply = await create(context, credspec);
    assert.is(reply.status, 201, `${variant.what}: ${messageOf(reply)}`);
  }
});

CredSpecs("a spec with no credspec is refused, in the webhook's words", async (context) => {
  const reply = await create(context, undefined);
  assert.is(reply.status, 422);
  assert.match(messageOf(reply), /the in-cluster policy of gmsa-admission: GMSACredentialSpec "spec-\d+" is not a valid Windows credential spec: credspec: is required/);
});

for (const variant of refused.filter((v) => v.what !== "credspec is a list")) {
  CredSpecs(`refuses ${variant.what}, naming ${variant.path}`, async (context) => {
    const credspec = credSpecFile(variant.file ?? "domain-joined.yaml").credspec;
    variant.edit(credspec);
    const reply = await create(context, credspec);
    assert.is(reply.status, 422, `expected the policy's refusal, got ${reply.status}: ${messageOf(reply)}`);
    const message = messageOf(reply);
    if (!message.includes("the in-cluster policy of gmsa-admission")) {
      // A key the CRD's schema names, given a value of another type: the API server refuses it itself, before any admission.
      assert.ok(message.includes(`${variant.path}: Invalid value`), `expected the schema's refusal at ${variant.path}: ${message}`);
      return;
    }
    assert.match(message, /^.*the in-cluster policy of gmsa-admission: GMSACredentialSpec "spec-\d+" is not a valid Windows credential spec: /);
    const finding = message.split(/: (?=credspec)|; (?=credspec)/).find((part) => part.startsWith(`${variant.path}: `));
    assert.ok(finding, `expected a finding at ${variant.path} in: ${message}`);
    assert.match(finding, variant.problem);
  });
}

CredSpecs("keys in another case are read as meant, and a key given twice in two cases is refused", async (context) => {
  const respelled = credSpecFile("domain-joined.yaml").credspec;
  respelled.domainJoinConfig = respelled.DomainJoinConfig;
  delete respelled.DomainJoinConfig;
  respelled.domainJoinConfig.SID = respelled.domainJoinConfig.Sid;
  delete respelled.domainJoinConfig.Sid;
  assert.is((await create(context, respelled)).status, 201, "a respelled key is the webhook's warning, not a refusal");
  respelled.domainJoinConfig.SID = "S-1-5-32-544";
  assert.match(messageOf(await create(context, respelled)), /credspec\.DomainJoinConfig\.Sid: must be a domain SID/);
});

CredSpecs("objects far past the bounds are refused in the webhook's words, not by the API server's cost limit", async (context) => {
  const wide = credSpecFile("domain-joined.yaml").credspec;
  for (let i = 0; i < 800; i++) wide.DomainJoinConfig[`Extra${i}`] = "x";
  const refusedWide = messageOf(await create(context, wide));
  assert.match(refusedWide, /credspec\.DomainJoinConfig: has 806 keys; an object of a credential spec has at most 32/);
  assert.match(
    checkCredSpec(wide)
      .errors.map((e) => `${e.path}: ${e.problem}`)
      .join("; "),
    /credspec\.DomainJoinConfig: has 806 keys/,
  );
  const long = credSpecFile("domain-joined.yaml").credspec;
  long.ActiveDirectoryConfig.GroupManagedServiceAccounts = Array.from({ length: 3000 }, (_, i) => ({ Name: `a${i}`, Scope: "contoso.com" }));
  assert.match(messageOf(await create(context, long)), /GroupManagedServiceAccounts: has 3000 entries; a credential spec lists at most 64 accounts/);
  // Long strings: each pattern is matched only after a length check, which costs nothing.
  const longName = credSpecFile("domain-joined.yaml").credspec;
  longName.DomainJoinConfig.MachineAccountName = "a".repeat(450_000);
  assert.match(messageOf(await create(context, longName)), /credspec\.DomainJoinConfig\.MachineAccountName: must be a non-empty string of at most 256 characters/);
  const longAccounts = credSpecFile("domain-joined.yaml").credspec;
  longAccounts.ActiveDirectoryConfig.GroupManagedServiceAccounts = Array.from({ length: 64 }, () => ({ Name: "n".repeat(4000), Scope: "s".repeat(4000) }));
  const longAccountsReply = messageOf(await create(context, longAccounts));
  assert.match(longAccountsReply, /GroupManagedServiceAccounts\[0\]\.Name: must be a non-empty string of at most 256 characters/);
  const longKeys = credSpecFile("domain-joined.yaml").credspec;
  longKeys.ActiveDirectoryConfig.GroupManagedServiceAccounts = Array.from({ length: 64 }, (_, a) =>
    Object.fromEntries(Array.from({ length: 32 }, (_, k) => [`${"k".repeat(500)}${a}-${k}`, "x"])),
  );
  assert.match(messageOf(await create(context, longKeys)), /GroupManagedServiceAccounts\[0\]: has a key that is a key of more than 64 characters/);
  const manyPlugins = credSpecFile("domain-joined.yaml").credspec;
  manyPlugins.CmsPlugins = ["ActiveDirectory", ...Array.from({ length: 250_000 }, (_, i) => `p${i}`)];
  assert.match(messageOf(await create(context, manyPlugins)), /credspec\.CmsPlugins: must be a list of at most 16 strings/);
  for (const spec of [longName, longAccounts, longKeys, manyPlugins]) assert.ok(checkCredSpec(spec).errors.length > 0, "the webhook refuses each too");
});

CredSpecs("an UPDATE that leaves credspec alone is not judged; one that breaks it is refused", async (context) => {
  const unchecked = await createUnchecked(context, { ...credSpecFile("no-credspec.yaml") });
  const labelled = await kubeRequest(context.admin, "PATCH", `${collection}/${unchecked}`, { metadata: { labels: { team: "web" } } }, "application/merge-patch+json");
  assert.is(labelled.status, 200, `a label on a spec that predates the policy: ${messageOf(labelled)}`);
  const good = specObject(context, credSpecFile("domain-joined.yaml").credspec);
  assert.is((await kubeRequest(context.admin, "POST", collection, good)).status, 201);
  const broken = await kubeRequest(
    context.admin,
    "PATCH",
    `${collection}/${(good.metadata as { name: string }).name}`,
    { credspec: { DomainJoinConfig: { Sid: "S-1-5-32-544" } } },
    "application/merge-patch+json",
  );
  assert.is(broken.status, 422);
  assert.match(messageOf(broken), /credspec\.DomainJoinConfig\.Sid: must be a domain SID/);
});

/** Creates `object` with the policy's binding out of the way, as a spec stored before the policy would be. */
async function createUnchecked(context: Context, object: Record<string, unknown>): Promise<string> {
  const bindingPath = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${safetyNetCredSpecPolicyName}`;
  const binding = (await kubeRequest(context.admin, "GET", bindingPath)).body as KubernetesObject;
  await kubeRequest(context.admin, "DELETE", bindingPath);
  const name = `old-${++context.serial}`;
  try {
    await waitFor(async () => (await kubeRequest(context.admin, "POST", collection, { ...object, metadata: { name } })).status === 201, "the policy was not lifted");
  } finally {
    await applyObjects(context.admin, [{ ...binding, metadata: { name: safetyNetCredSpecPolicyName, labels: binding.metadata.labels } } as KubernetesObject]);
    await waitFor(async () => (await create(context, undefined)).status === 422, "the credential spec policy was not enforced again");
  }
  return name;
}

/** Random edits of a well-formed spec: a field dropped, retyped, respelled, or given a near-miss value. */
const edits = fc.array(
  fc.record({
    path: fc.constantFrom(
      ["CmsPlugins"],
      ["DomainJoinConfig"],
      ["DomainJoinConfig", "Sid"],
      ["DomainJoinConfig", "MachineAccountName"],
      ["DomainJoinConfig", "Guid"],
      ["DomainJoinConfig", "DnsTreeName"],
      ["DomainJoinConfig", "DnsName"],
      ["DomainJoinConfig", "NetBiosName"],
      ["ActiveDirectoryConfig"],
      ["ActiveDirectoryConfig", "GroupManagedServiceAccounts"],
      ["ActiveDirectoryConfig", "HostAccountConfig"],
      ["ActiveDirectoryConfig", "HostAccountConfig", "PluginGUID"],
      ["ActiveDirectoryConfig", "HostAccountConfig", "PluginInput"],
      ["ActiveDirectoryConfig", "HostAccountConfig", "PortableCcgVersion"],
    ),
    change: fc.oneof(
      fc.constant({ kind: "delete" as const }),
      fc.constant({ kind: "upper" as const }),
      fc.constant({ kind: "twice" as const }),
      fc.constant({ kind: "nonAsciiTwin" as const }),
      fc.constant({ kind: "crowd" as const }),
      fc.record({
        kind: fc.constant("set" as const),
        value: fc.oneof(
          fc.constantFrom(
            "",
            " ",
            "S-1-5-21-1-2-3",
            "S-1-5-21-1-2-3-4-5",
            "{0E1A5A3C-8F6D-4C2B-9B7E-2D4A6F8C1E3B}",
            "0e1a5a3c-8f6d-4c2b-9b7e-2d4a6f8c1e3b",
            "CONTOSO",
            "contoso.com",
            "a b",
          ),
          // Where JavaScript and RE2 differ unless the policy's patterns are rendered with care, and the length bounds.
          fc.constantFrom(
            "ſ-1-5-21-1-2-3",
            "s-1-5-21-1-2-3",
            "\u000b",
            "CON\u000bTOSO",
            "\u00a0",
            "CON\u2028TOSO",
            "\u180e",
            "\u0085",
            "\ufeff",
            "😀".repeat(15),
            "😀".repeat(16),
            "ＣＯＮＴＯＳＯ",
            "a".repeat(256),
            "a".repeat(257),
            `${"a".repeat(63)}.`.repeat(4),
          ),
          fc.string({ maxLength: 20 }),
          fc.string({ maxLength: 20, unit: "grapheme" }),
          fc.integer(),
          fc.constant(null),
          fc.constant([]),
          fc.constant({}),
          fc.constant(["ActiveDirectory"]),
        ),
      }),
    ),
  }),
  { minLength: 1, maxLength: 3 },
);

type Edit = typeof edits extends fc.Arbitrary<(infer E)[]> ? E : never;

function applyEdit(credspec: Record<string, unknown>, edit: Edit): void {
  let holder: Record<string, unknown> = credspec;
  for (const key of edit.path.slice(0, -1)) {
    const next = holder[key];
    if (typeof next !== "object" || next === null || Array.isArray(next)) return;
    holder = next as Record<string, unknown>;
  }
  const key = edit.path[edit.path.length - 1]!;
  if (!(key in holder)) return;
  const value = holder[key];
  if (edit.change.kind === "delete") delete holder[key];
  if (edit.change.kind === "upper") {
    delete holder[key];
    holder[key.toUpperCase()] = value;
  }
  if (edit.change.kind === "twice") holder[key.toLowerCase()] = value;
  // A key that JavaScript and CEL fold differently: the Kelvin sign lower-cases to k in JavaScript only.
  if (edit.change.kind === "nonAsciiTwin") holder[`${key}\u212A`] = value;
  if (edit.change.kind === "crowd") for (let i = 0; i < 40; i++) holder[`Extra${i}`] = i;
  if (edit.change.kind === "set") holder[key] = edit.change.value;
}

CredSpecs("over random edits, the policy refuses exactly what the webhook refuses", async (context) => {
  const runs = Number(process.env.SAFETY_NET_CREDSPEC_RUNS ?? 60);
  let bothRefused = 0;
  let bothAdmitted = 0;
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...wellFormed), edits, async (file, changes) => {
      const credspec = credSpecFile(file).credspec as Record<string, unknown>;
      for (const change of changes) applyEdit(credspec, change);
      const reply = await create(context, credspec);
      // The API server's own schema may refuse first (a known key of the wrong type): then neither policy nor webhook is asked.
      if (reply.status === 422 && !messageOf(reply).includes("the in-cluster policy of gmsa-admission")) return;
      assert.ok(reply.status === 201 || reply.status === 422, `unexpected ${reply.status}: ${messageOf(reply)}`);
      if (reply.status === 422) {
        // Never stricter than the webhook: what the policy refuses, the webhook refuses.
        assert.ok(checkCredSpec(credspec).errors.length > 0, `the policy refused what the webhook admits: ${messageOf(reply)}`);
        bothRefused++;
        return;
      }
      // Admitted: judged as the webhook would have seen it, after the API server dropped nulls from the fields its schema names.
      const stored = (reply.body as { credspec?: unknown }).credspec;
      const webhook = checkCredSpec(stored);
      if (webhook.errors.length === 0) {
        bothAdmitted++;
        return;
      }
      assert.unreachable(`the webhook refuses (${JSON.stringify(webhook.errors)}) but the policy admitted ${JSON.stringify(stored)}`);
    }),
    { numRuns: runs, seed: process.env.SAFETY_NET_CREDSPEC_SEED === undefined ? undefined : Number(process.env.SAFETY_NET_CREDSPEC_SEED) },
  );
  console.log(`  credential spec agreement over ${runs} random specs: ${bothRefused} refused by both, ${bothAdmitted} admitted by both`);
});

CredSpecs("without the policy a spec with no credspec goes through: the refusals above were the policy's", async (context) => {
  await kubeRequest(context.admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${safetyNetCredSpecPolicyName}`);
  await waitFor(async () => (await create(context, undefined)).status === 201, "the spec was not admitted without the policy");
});

CredSpecs.run();
