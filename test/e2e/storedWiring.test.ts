import { KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects, fieldManager } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import { runCredspec } from "../../cluster/credspecCommand.js";
import { createdByWiringAnnotation } from "../../cluster/namespaceOwnership.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { relayName } from "../../cluster/relay.js";
import { issueRelayCertificate } from "../../cluster/relayCertificate.js";
import { exitCodes, renderWiring, runWire } from "../../cluster/wire.js";
import { parseWireArguments } from "../../cluster/wireArguments.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { exampleObjects, localWiring, wireLocalCluster } from "../../host/localCluster.js";
import { credSpecFixture } from "../support/fixtures.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { renderedFieldsNotStored } from "../../lib/wiring/asRendered.js";

/**
 * What the cluster stores is what the wiring rendered. Every object of every wiring (relay, url,
 * a fleet member's, the local host's) is applied to a real kube-apiserver, read back as raw JSON,
 * and compared field by field with what was rendered: the server may add fields, never drop or
 * change one. The relay's NetworkPolicy without its `from` admits every pod; the CRD without
 * `x-kubernetes-preserve-unknown-fields` prunes credential spec keys.
 */
interface Context {
  controlPlane: ControlPlane;
  admin: KubeConfig;
}

const Stored = suite<Context>("what the cluster stores is what the wiring rendered", {} as Context);

Stored.before(async (context) => {
  try {
    context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
    context.admin = new KubeConfig();
    context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
  } catch (error) {
    console.error("stored wiring set-up failed:", error);
    throw error;
  }
});

Stored.after(async (context) => {
  await context.controlPlane?.stop();
});

const identity = "11111111-2222-3333-4444-555555555555";
const functionUrl = "https://func-gmsa-abc.azurewebsites.net";
const functionKey = "AbCdEfGhIjKlMnOp0123==";
const memberSecret = "Zq8xR2mW7pLk4NvB9tHc3JdF6sGy1QaE";

/** The path of an object, found the way a client finds it: the API server's discovery. */
async function objectPath(admin: KubeConfig, object: Pick<KubernetesObject, "apiVersion" | "kind" | "metadata">): Promise<string> {
  const group = object.apiVersion.includes("/") ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
  const discovery = await kubeRequest(admin, "GET", group);
  assert.is(discovery.status, 200, `discovery of ${object.apiVersion}`);
  const resource = (discovery.body.resources as Array<{ name: string; kind: string; namespaced: boolean }>).find((r) => r.kind === object.kind && !r.name.includes("/"));
  assert.ok(resource, `${object.kind} is served in ${object.apiVersion}`);
  const scope = resource.namespaced ? `/namespaces/${object.metadata.namespace}` : "";
  return `${group}${scope}/${resource.name}/${object.metadata.name}`;
}

async function storedObject(admin: KubeConfig, object: KubernetesObject): Promise<any> {
  const reply = await kubeRequest(admin, "GET", await objectPath(admin, object));
  assert.is(reply.status, 200, `${object.kind}/${object.metadata.name} is stored`);
  return reply.body;
}

/** Reads every object back and names each rendered field that is missing or different. */
async function notStored(admin: KubeConfig, objects: readonly KubernetesObject[]): Promise<string[]> {
  const problems: string[] = [];
  for (const object of objects) {
    const stored = await storedObject(admin, object);
    problems.push(...renderedFieldsNotStored(object, stored).map((problem) => `${object.kind}/${object.metadata.name}: ${problem}`));
  }
  return problems;
}

function installRequest(argv: string[], env: Record<string, string> = {}) {
  const request = parseWireArguments(argv, env);
  if (request.action !== "install") throw new Error("not an install");
  return request;
}

/** Nothing serves the webhooks these tests wire: objects they would be asked about are made without them. */
async function dropWebhooks(context: Context): Promise<void> {
  for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
    await kubeRequest(context.admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/${kind}/gmsa-admission`);
  }
}

async function wire(context: Context, argv: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runWire(argv, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), kubeConfig: () => context.admin, env });
  return { code, stdout, stderr };
}

async function credspec(context: Context, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCredspec(args, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), readFile: (path) => readFileSync(path), kubeConfig: () => context.admin });
  return { code, stdout, stderr };
}

/** Server-side applies a manifest as raw JSON, as this field manager. */
async function applyRaw(context: Context, object: KubernetesObject, manager: string): Promise<void> {
  const reply = await kubeRequest(context.admin, "PATCH", `${await objectPath(context.admin, object)}?fieldManager=${manager}&force=true`, object, "application/apply-patch+yaml");
  assert.ok(reply.status === 200 || reply.status === 201, JSON.stringify(reply.body));
}

const relayArgv = ["--function-url", functionUrl, "--identity", identity, "--mode", "relay", "--function-key", functionKey, "--apply"];

Stored("the local host's wiring (npm start): every rendered field is stored, the example credential specs included", async (context) => {
  const webhook = { url: "https://127.0.0.1:1/unused", caPem: (await issueRelayCertificate("local")).caPem, authorizeRequestingUser: true };
  const extra = exampleObjects("demo.yaml");
  await wireLocalCluster({ adminKubeconfig: context.controlPlane.kubeconfigPath }, webhook, extra);
  assert.equal(await notStored(context.admin, localWiring(webhook, extra)), []);
});

Stored("relay wiring: every rendered field is stored, the NetworkPolicy's sources and the CRD's preserved fields included", async (context) => {
  const certificate = await issueRelayCertificate("gmsa-admission");
  const objects = renderWiring(installRequest(relayArgv), true, certificate);
  await applyObjects(context.admin, objects);
  assert.equal(await notStored(context.admin, objects), []);
  const policy = await storedObject(
    context.admin,
    objects.find((o) => o.kind === "NetworkPolicy")!,
  );
  assert.equal(policy.spec.ingress[0].from, [
    { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { app: "konnectivity-agent" } } },
  ]);
  const crd = await storedObject(context.admin, credSpecCrd());
  for (const version of crd.spec.versions) assert.is(version.schema.openAPIV3Schema.properties.credspec["x-kubernetes-preserve-unknown-fields"], true, version.name);
});

Stored("url wiring: every rendered field is stored", async (context) => {
  const objects = renderWiring(
    installRequest(["--function-url", functionUrl, "--identity", identity, "--mode", "url", "--timeout-seconds", "7", "--authorize-requesting-user"]),
    true,
    undefined,
  );
  await applyObjects(context.admin, objects);
  assert.equal(await notStored(context.admin, objects), []);
});

Stored("a fleet member's relay wiring: every rendered field is stored, the member's secret and allowed CIDRs included", async (context) => {
  const certificate = await issueRelayCertificate("gmsa-member");
  const argv = [...relayArgv, "--cluster", "west", "--namespace", "gmsa-member", "--relay-allow-from", "konnectivity,10.1.2.0/28"];
  const objects = renderWiring(installRequest(argv, { GMSA_CLUSTER_SECRET: memberSecret }), true, certificate);
  await applyObjects(context.admin, objects);
  assert.equal(await notStored(context.admin, objects), []);
  const policy = await storedObject(
    context.admin,
    objects.find((o) => o.kind === "NetworkPolicy")!,
  );
  assert.equal(policy.spec.ingress[0].from.length, 2);
  assert.equal(policy.spec.ingress[0].from[1], { ipBlock: { cidr: "10.1.2.0/28" } });
});

Stored("a fleet member's url wiring: every rendered field is stored", async (context) => {
  const argv = ["--function-url", functionUrl, "--identity", identity, "--mode", "url", "--cluster", "east", "--apply"];
  const objects = renderWiring(installRequest(argv, { GMSA_CLUSTER_SECRET: memberSecret }), true, undefined);
  await applyObjects(context.admin, objects);
  assert.equal(await notStored(context.admin, objects), []);
});

Stored("a relay stored by earlier wiring, open to every source: the plan shows the missing sources, wiring warns and restores them", async (context) => {
  const namespace = "gmsa-repair";
  const argv = [...relayArgv, "--namespace", namespace];
  const first = await wire(context, argv);
  assert.is(first.code, exitCodes.ok, first.stderr);
  assert.not.match(first.stderr, /is open/);
  // The namespace the wiring created carries its mark, as created.
  const createdNamespace = (await kubeRequest(context.admin, "GET", `/api/v1/namespaces/${namespace}`)).body;
  assert.is(createdNamespace.metadata.annotations[createdByWiringAnnotation], "wire");
  // What the wiring stored before it sent wire JSON: the same objects, applied by the same field
  // manager, with the fields client-node's serializer dropped.
  const policyPath = `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies/${relayName}`;
  const policy = (await kubeRequest(context.admin, "GET", policyPath)).body;
  const rendered = { apiVersion: policy.apiVersion, kind: policy.kind, metadata: { name: relayName, namespace, labels: policy.metadata.labels }, spec: policy.spec };
  const open = { ...rendered, spec: { ...rendered.spec, ingress: rendered.spec.ingress.map(({ ports }: { ports: unknown }) => ({ ports })) } };
  await applyRaw(context, open, fieldManager);
  const crd = credSpecCrd();
  const pruning = JSON.parse(JSON.stringify(crd).replaceAll(',"x-kubernetes-preserve-unknown-fields":true', ""));
  assert.not.equal(pruning, crd, "the old CRD lacks the preserved fields");
  await applyRaw(context, pruning, fieldManager);
  assert.equal((await kubeRequest(context.admin, "GET", policyPath)).body.spec.ingress[0].from, undefined, "stored open, as by the old wiring");

  const plan = await wire(context, [...argv, "--dry-run"]);
  assert.is(plan.code, exitCodes.ok, plan.stderr);
  assert.match(plan.stderr, new RegExp(`warning: the relay in namespace ${namespace} is open: networkpolicy/${relayName} has an ingress rule without sources`));
  assert.match(plan.stdout, new RegExp(`NetworkPolicy/${namespace}/${relayName}: update spec\\.ingress\\[0\\]\\.from`));
  assert.match(plan.stdout, /CustomResourceDefinition\/gmsacredentialspecs\.windows\.k8s\.io: update .*x-kubernetes-preserve-unknown-fields/);
  assert.equal((await kubeRequest(context.admin, "GET", policyPath)).body.spec.ingress[0].from, undefined, "a dry run changes nothing");

  const repair = await wire(context, argv);
  assert.is(repair.code, exitCodes.ok, repair.stderr);
  assert.match(repair.stderr, /is open: .* this wiring restores the relay's own policy/);
  const repaired = (await kubeRequest(context.admin, "GET", policyPath)).body;
  assert.equal(repaired.spec.ingress[0].from, rendered.spec.ingress[0].from);
  const storedCrd = (await kubeRequest(context.admin, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gmsacredentialspecs.windows.k8s.io")).body;
  assert.equal(renderedFieldsNotStored(crd, storedCrd), []);

  const again = await wire(context, argv);
  assert.not.match(again.stderr, /is open/, "once restored, no warning");
});

Stored("the credential spec tool: what `generate --apply` and `grant --apply` store is what they render", async (context) => {
  await dropWebhooks(context);
  const created = await kubeRequest(context.admin, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } });
  assert.ok(created.status === 201 || created.status === 409, JSON.stringify(created.body));
  const generate = [
    "generate",
    "--dns-name",
    "contoso.com",
    "--netbios-name",
    "CONTOSO",
    "--sid",
    "S-1-5-21-2126729477-2524075714-3094792973",
    "--guid",
    "244818ae-87ca-4fcd-92ec-e79e5252348a",
    "--account",
    "Orders",
  ];
  for (const args of [generate, ["grant", "orders", "--service-account", "shop/orders"], ["grant", "orders", "--service-account", "shop/batch", "--cluster-wide"]]) {
    const rendered = await credspec(context, args);
    assert.is(rendered.code, 0, rendered.stderr);
    const objects = parseAllDocuments(rendered.stdout).map((document) => document.toJS() as KubernetesObject);
    assert.ok(objects.length > 0, args.join(" "));
    const applied = await credspec(context, [...args, "--apply"]);
    assert.is(applied.code, 0, applied.stderr);
    assert.equal(await notStored(context.admin, objects), [], args.join(" "));
  }
});

Stored("a credential spec with an unknown key keeps it: the CRD preserves what the schema does not name", async (context) => {
  // Well formed, so that the safety net's credential spec policy admits it; one key respelled, one unknown.
  const { Sid, ...joinConfig } = credSpecFixture("webapp1-credspec").credspec!.DomainJoinConfig as Record<string, unknown>;
  const spec = {
    apiVersion: "windows.k8s.io/v1",
    kind: "GMSACredentialSpec",
    metadata: { name: "stored-unknown-key" },
    credspec: { ...credSpecFixture("webapp1-credspec").credspec, DomainJoinConfig: { ...joinConfig, sid: Sid }, ExtraSetting: { Kept: true } },
  };
  await dropWebhooks(context);
  const created = await kubeRequest(context.admin, "POST", "/apis/windows.k8s.io/v1/gmsacredentialspecs", spec);
  assert.is(created.status, 201, JSON.stringify(created.body));
  const stored = (await kubeRequest(context.admin, "GET", "/apis/windows.k8s.io/v1/gmsacredentialspecs/stored-unknown-key")).body;
  assert.equal(stored.credspec, spec.credspec);
});

Stored.run();
