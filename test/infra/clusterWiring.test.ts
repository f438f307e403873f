import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { bicepWiringPath, renderBicepWiring } from "../../cluster/bicepWiring.js";
import { memberUrlPathPrefix } from "../../cluster/fleetMember.js";
import { clusterManifests, relayCaBundle, type KubernetesObject } from "../../cluster/manifests.js";
import { relayChecksumAnnotation } from "../../cluster/relay.js";
import type { RelayAllowedSource } from "../../cluster/relayNetworkPolicy.js";
import { excludedNamespaceLabel } from "../../cluster/webhookConfigurations.js";
import { type BicepFile, type Value, declarations, declarationsOf, evaluate, infraFile, kids, property, propertiesOf, repoRoot } from "./bicepTree.js";

/**
 * One source of truth: the Bicep module is generated from the wiring renderer, and evaluating
 * it gives the objects the renderer gives for the same inputs, in both modes.
 */
const inputs = {
  functionHost: "func-gmsa-abc.azurewebsites.net",
  identityObjectId: "11111111-2222-3333-4444-555555555555",
  functionKey: "AbCdEfGhIjKlMnOp0123==",
  relayCaCertificate: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n",
  relayTlsCertificate: "-----BEGIN CERTIFICATE-----\nSERVING\n-----END CERTIFICATE-----\n",
  relayTlsKey: "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n",
  kubeConfig: "a2ViZWNvbmZpZw==",
  safetyNet: true,
  audit: false,
};

function rendered(
  mode: "url" | "relay",
  installCrd: boolean,
  {
    previousCa = "",
    allowFrom,
    authorizeRequestingUser = false,
    cluster,
    safetyNet = true,
    audit = false,
  }: {
    previousCa?: string;
    allowFrom?: readonly RelayAllowedSource[];
    authorizeRequestingUser?: boolean;
    cluster?: { name: string; secret: string };
    safetyNet?: boolean;
    audit?: boolean;
  } = {},
): KubernetesObject[] {
  const target =
    mode === "relay"
      ? ({
          kind: "relay",
          function: { host: inputs.functionHost, port: 443 },
          functionKey: inputs.functionKey,
          certificate: { caPem: inputs.relayCaCertificate, certPem: inputs.relayTlsCertificate, keyPem: inputs.relayTlsKey },
          ...(allowFrom === undefined ? {} : { allowFrom }),
          ...(cluster === undefined ? {} : { cluster }),
        } as const)
      : ({ kind: "url", baseUrl: `https://${inputs.functionHost}`, ...(cluster === undefined ? {} : { pathPrefix: memberUrlPathPrefix(cluster) }) } as const);
  return clusterManifests({
    target,
    subject: { kind: "User", name: inputs.identityObjectId },
    includeCrd: installCrd,
    authorizeRequestingUser,
    safetyNet,
    audit,
    ...(previousCa === "" ? {} : { relayCaBundlePem: relayCaBundle(inputs.relayCaCertificate, previousCa) }),
  });
}

/** The objects the module deploys for these parameters: its resources whose condition holds, evaluated. */
function deployed(file: BicepFile, bindings: Record<string, Value>): Array<Record<string, Value>> {
  return declarations(file)
    .filter((d) => d.kind === "resource")
    .filter((d) => d.body?.condition === undefined || evaluate(file, d.body.condition, { bindings }) === true)
    .map((d) => {
      const [group, rest] = (d.target ?? "").split("/") as [string, string];
      const [kind, version] = rest.split("@") as [string, string];
      const object: Record<string, Value> = { apiVersion: group === "core" ? version : `${group}/${version}`, kind };
      for (const [key, node] of propertiesOf(d.body!.object)) if (key !== "dependsOn") object[key] = evaluate(file, node, { bindings });
      return object;
    });
}

function withoutChecksum(objects: readonly unknown[]): unknown {
  return JSON.parse(JSON.stringify(objects), (key, value) => (key === relayChecksumAnnotation ? "(checksum)" : value));
}

const Wiring = suite<{ file: BicepFile }>("cluster wiring module", {} as { file: BicepFile });

Wiring.before(async (context) => {
  context.file = await infraFile(bicepWiringPath);
});

Wiring("the committed module is what the renderer generates now (npx tsx scripts/render-bicep-wiring.ts)", () => {
  const committed = readFileSync(join(repoRoot, bicepWiringPath), "utf8");
  assert.ok(committed === renderBicepWiring(), `${bicepWiringPath} is stale: run npx tsx scripts/render-bicep-wiring.ts`);
});

for (const mode of ["url", "relay"] as const) {
  for (const installCrd of [true, false]) {
    Wiring(`${mode} mode${installCrd ? "" : " without the CRD"}: the module deploys exactly the rendered objects`, ({ file }) => {
      const bindings = { ...inputs, mode, installCrd };
      assert.equal(withoutChecksum(deployed(file, bindings)), withoutChecksum(rendered(mode, installCrd)));
    });
  }
}

const member = { name: "west-eu-2", secret: "Member-secret_0123456789abcdefghijklmno" };

for (const mode of ["url", "relay"] as const) {
  Wiring(`${mode} mode for a fleet member (clusterName, clusterSecret): the module deploys exactly what wire --cluster renders`, ({ file }) => {
    const objects = deployed(file, { ...inputs, mode, installCrd: true, clusterName: member.name, clusterSecret: member.secret });
    assert.equal(withoutChecksum(objects), withoutChecksum(rendered(mode, true, { cluster: member })));
    assert.is.not(JSON.stringify(withoutChecksum(objects)), JSON.stringify(withoutChecksum(rendered(mode, true))), "a member's objects are not a single cluster's");
  });
}

Wiring("safetyNet=false leaves the in-cluster policies out, as --no-safety-net does", ({ file }) => {
  for (const mode of ["url", "relay"] as const) {
    const without = deployed(file, { ...inputs, mode, installCrd: true, safetyNet: false });
    assert.equal(withoutChecksum(without), withoutChecksum(rendered(mode, true, { safetyNet: false })));
    assert.not.ok(without.some((o) => String(o.kind).startsWith("ValidatingAdmissionPolicy") && !JSON.stringify(o).includes("canary")));
  }
});

Wiring("audit=true adds the audit's read-only role, as --audit does; by default it is not deployed", ({ file }) => {
  for (const mode of ["url", "relay"] as const) {
    const withAudit = deployed(file, { ...inputs, mode, installCrd: true, audit: true });
    assert.equal(withoutChecksum(withAudit), withoutChecksum(rendered(mode, true, { audit: true })));
    assert.ok(withAudit.some((o) => o.kind === "ClusterRole" && JSON.stringify(o).includes("gmsa-admission-audit")));
    assert.not.ok(deployed(file, { ...inputs, mode, installCrd: true }).some((o) => JSON.stringify(o).includes("gmsa-admission-audit")));
  }
});

Wiring("a new member secret restarts the relay's pods; a single cluster's module has no member paths or header", ({ file }) => {
  const checksum = (bindings: Record<string, Value>) =>
    JSON.stringify(deployed(file, { ...inputs, mode: "relay", installCrd: true, ...bindings }).find((o) => o.kind === "Deployment")).match(new RegExp(`"${relayChecksumAnnotation}":"([^"]+)"`))?.[1];
  const first = checksum({ clusterName: member.name, clusterSecret: member.secret });
  assert.is.not(checksum({ clusterName: member.name, clusterSecret: `${member.secret}x` }), first);
  assert.is.not(checksum({}), first);
  const single = JSON.stringify(deployed(file, { ...inputs, mode: "relay", installCrd: true }));
  assert.not.match(single, /clusters|x-gmsa-cluster-secret|cluster-secret\.conf/);
  assert.ok(declarationsOf(file, "param").get("clusterSecret")?.decorators.some((call) => call.text === "secure()"), "clusterSecret is @secure()");
});

Wiring("authorizeRequestingUser lets the webhook's role create SubjectAccessReviews, as the renderer does; by default it may not", ({ file }) => {
  const reviews = (objects: readonly unknown[]) =>
    JSON.stringify((objects.find((o) => JSON.stringify(o).includes('"kind":"ClusterRole"')) as any)?.rules.find((rule: any) => rule.apiGroups.includes("authorization.k8s.io")).resources);
  for (const mode of ["url", "relay"] as const) {
    assert.is(reviews(deployed(file, { ...inputs, mode, installCrd: true })), '["localsubjectaccessreviews"]');
    const checked = deployed(file, { ...inputs, mode, installCrd: true, authorizeRequestingUser: true });
    assert.is(reviews(checked), '["localsubjectaccessreviews","subjectaccessreviews"]');
    assert.equal(withoutChecksum(checked), withoutChecksum(rendered(mode, true, { authorizeRequestingUser: true })));
  }
});

Wiring("relay mode: the namespace it may be pointed at is not opted out of the webhooks", ({ file }) => {
  const namespace = deployed(file, { ...inputs, mode: "relay", installCrd: true }).find((o) => o.kind === "Namespace") as any;
  assert.ok(namespace, "relay mode deploys the namespace");
  assert.is(namespace.metadata.labels[excludedNamespaceLabel.key], undefined);
});

Wiring("relay mode: the NetworkPolicy admits the sources the parameters name, as the renderer does; none admits nobody", ({ file }) => {
  const cases: ReadonlyArray<readonly [Record<string, Value>, readonly RelayAllowedSource[]]> = [
    [{ relayAllowFromCidrs: ["10.224.0.0/28"] }, [{ kind: "konnectivity" }, { kind: "cidr", cidr: "10.224.0.0/28" }]],
    [{ relayAllowKonnectivity: false, relayAllowFromCidrs: ["10.224.0.0/28", "fd00::/64"] }, [{ kind: "cidr", cidr: "10.224.0.0/28" }, { kind: "cidr", cidr: "fd00::/64" }]],
    [{ relayAllowKonnectivity: false }, []],
  ];
  const policy = (objects: readonly unknown[]) => JSON.stringify(objects.find((o) => JSON.stringify(o).includes('"kind":"NetworkPolicy"')));
  for (const [bindings, allowFrom] of cases) {
    const fromModule = policy(deployed(file, { ...inputs, mode: "relay", installCrd: true, ...bindings }));
    assert.is(fromModule, policy(rendered("relay", true, { allowFrom })), JSON.stringify(bindings));
  }
  const none = JSON.parse(policy(deployed(file, { ...inputs, mode: "relay", installCrd: true, relayAllowKonnectivity: false })) ?? "{}");
  assert.equal(none.spec.ingress, [], "no rule, so no connection at all");
});

Wiring("the relay's pods restart when the certificate or the key changes", ({ file }) => {
  const checksum = (bindings: Record<string, Value>) => {
    const deployment = deployed(file, { ...inputs, mode: "relay", installCrd: true, ...bindings }).find((o) => o.kind === "Deployment");
    return JSON.stringify(deployment).match(new RegExp(`"${relayChecksumAnnotation}":"([^"]+)"`))?.[1];
  };
  const base = checksum({});
  assert.ok(base);
  assert.is.not(checksum({ relayTlsCertificate: "other" }), base);
  assert.is.not(checksum({ functionKey: "AnotherKey0123456789" }), base);
});

const previousCa = "-----BEGIN CERTIFICATE-----\nOLD CA\n-----END CERTIFICATE-----\n";

Wiring("during a rotation the webhooks trust the previous CA too; the relay's Secret holds only the new one and the pods do not restart for it", ({ file }) => {
  const bindings = { ...inputs, mode: "relay", installCrd: true, relayPreviousCaCertificate: previousCa };
  const objects = deployed(file, bindings);
  assert.equal(withoutChecksum(objects), withoutChecksum(rendered("relay", true, { previousCa })));
  for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
    const webhook = objects.find((o) => o.kind === kind) as any;
    const bundle = Buffer.from(webhook.webhooks[0].clientConfig.caBundle, "base64").toString();
    assert.ok(bundle.includes(inputs.relayCaCertificate) && bundle.includes(previousCa), `${kind} trusts both CAs`);
  }
  const secret = objects.find((o) => o.kind === "Secret" && (o.metadata as any).name.endsWith("-tls")) as any;
  assert.is(Buffer.from(secret.data["ca.crt"], "base64").toString(), inputs.relayCaCertificate);
  const checksum = (list: typeof objects) => JSON.stringify(list.find((o) => o.kind === "Deployment")).match(new RegExp(`"${relayChecksumAnnotation}":"([^"]+)"`))?.[1];
  assert.is(checksum(objects), checksum(deployed(file, { ...inputs, mode: "relay", installCrd: true })));
});

Wiring("the webhook configurations are deployed before the relay's TLS Secret, and the Deployment after both", ({ file }) => {
  const resources = declarationsOf(file, "resource");
  const dependsOn = (name: string) => {
    const list = property(resources.get(name)!.body!.object, "dependsOn");
    return list ? kids(list).map((node) => node.text).filter((text) => /^[A-Za-z]/.test(text)) : [];
  };
  for (const serving of ["secretTls", "deployment"]) {
    assert.ok(dependsOn(serving).includes("mutatingWebhookConfiguration") && dependsOn(serving).includes("validatingWebhookConfiguration"), `${serving} waits for the webhooks`);
  }
  assert.ok(dependsOn("deployment").includes("secretTls"), "the pods start from the new Secret");
  for (const webhook of ["mutatingWebhookConfiguration", "validatingWebhookConfiguration"]) {
    assert.not.ok(dependsOn(webhook).includes("secretTls") || dependsOn(webhook).includes("deployment"), `${webhook} does not wait for what it must come before`);
    assert.ok(dependsOn(webhook).includes("service"), `${webhook} comes after the service it addresses`);
  }
  assert.match(declarationsOf(file, "param").get("relayPreviousCaCertificate")?.decorators.map((d) => d.text).join(" ") ?? "", /while rotating/);
});

Wiring("both webhook configurations tell the AKS Admissions Enforcer to leave them alone, and exclude only kube-system and opted-out namespaces", ({ file }) => {
  for (const mode of ["url", "relay"]) {
    const webhooks = deployed(file, { ...inputs, mode, installCrd: true }).filter((o) => String(o.kind).endsWith("WebhookConfiguration")) as any[];
    assert.is(webhooks.length, 2);
    for (const webhook of webhooks) {
      assert.equal(webhook.metadata.annotations, { "admissions.enforcer/disabled": "true" });
      assert.equal(webhook.webhooks[0].namespaceSelector.matchExpressions.map((e: any) => e.key), ["kubernetes.io/metadata.name", "windows.k8s.io/disabled"]);
    }
  }
});

Wiring("secrets come in as secure parameters, and the admin kubeconfig is said to need local accounts", ({ file }) => {
  const params = declarationsOf(file, "param");
  for (const name of ["kubeConfig", "functionKey", "relayTlsKey"]) {
    assert.ok(params.get(name)?.decorators.some((call) => call.text === "secure()"), `${name} is @secure()`);
  }
  assert.match(params.get("kubeConfig")?.decorators.map((d) => d.text).join(" ") ?? "", /local accounts/);
  const extension = kids(file.root).find((node) => node.text.startsWith("provider") || node.text.startsWith("extension"));
  assert.ok(extension, "the module uses the Kubernetes extension");
  assert.match(file.source, /^extension kubernetes with \{\n  namespace: relayNamespace\n  kubeConfig: kubeConfig\n\}$/m);
});

Wiring("main.bicep deploys it only when asked, with the function's host and identity", async () => {
  const main = await infraFile("infra/main.bicep");
  const module = declarationsOf(main, "module").get("clusterWiring");
  assert.ok(module);
  assert.is(module.target, "modules/cluster-wiring.bicep");
  assert.is(evaluate(main, declarationsOf(main, "param").get("wireCluster")!.value!), false);
  assert.is(module.body?.condition?.text, "(wiring)");
  const params = property(module.body!.object, "params");
  assert.is(property(params, "functionHost")?.text, "functionApp.outputs.defaultHostName");
  assert.is(property(params, "identityObjectId")?.text, "identity.outputs.principalId");
  assert.is(property(params, "authorizeRequestingUser")?.text, "authorizeRequestingUser", "the role grants what the function's requesting-user check asks");
  assert.match(property(params, "kubeConfig")?.text ?? "", /^wiring \? cluster\.listClusterAdminCredential\(\)\.kubeconfigs\[0\]\.value : ''$/);
});

Wiring("each namespaced object waits for its own namespace: the relay's objects for the relay's, the canary's for the canary's", () => {
  const text = renderBicepWiring();
  const blocks = text.split(/\nresource /).slice(1);
  const dependsOn = (block: string) => /dependsOn: \[([^\]]*)\]/.exec(block)?.[1] ?? "";
  const inNamespace = (namespace: string) => new RegExp(`^\\w+ '[^']+' = [^\\n]*\\{\\n  metadata: \\{\\n    name: [^\\n]+\\n    namespace: ${namespace}\\n`);
  const relayObjects = blocks.filter((block) => inNamespace("relayNamespace").test(block));
  const canaryObjects = blocks.filter((block) => inNamespace("'gmsa-admission-canary'").test(block));
  assert.ok(relayObjects.length >= 5 && canaryObjects.length >= 3, `${relayObjects.length} relay, ${canaryObjects.length} canary objects`);
  for (const block of relayObjects) assert.not.match(dependsOn(block), /namespaceCanary/, block.split("\n")[0]);
  for (const block of canaryObjects) assert.match(dependsOn(block), /namespaceCanary/, block.split("\n")[0]);
});

Wiring.run();
