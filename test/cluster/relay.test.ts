import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { relayChecksumAnnotation, relayDefaultImage, relayName, type RelayWiring } from "../../cluster/relay.js";
import { issueRelayCertificate, reusableRelayCertificate } from "../../cluster/relayCertificate.js";

/** The relay's objects as the renderer makes them: what runs in the cluster, and how safely. */
const certificate = { caPem: "-----CA-----\n", certPem: "-----CERT-----\n", keyPem: "-----KEY-----\n" };
const relay: RelayWiring = { function: { host: "func-gmsa.azurewebsites.net", port: 443 }, functionKey: "k3y-AbCdEfGh1234567890==", certificate };

function render(overrides: Partial<RelayWiring> = {}, timeoutSeconds = 5): KubernetesObject[] {
  return clusterManifests({ target: { kind: "relay", ...relay, ...overrides }, subject: { kind: "User", name: "0000-identity" }, timeoutSeconds });
}

function find(objects: KubernetesObject[], kind: string, name = relayName): any {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `${kind}/${name} is rendered`);
  return found;
}

function nginxConf(objects: KubernetesObject[]): string {
  return find(objects, "ConfigMap").data["nginx.conf"];
}

const Relay = suite("relay objects");

Relay("are rendered in relay mode only, before the webhook configurations that point at them", () => {
  const kinds = render().map((o) => o.kind);
  assert.equal(kinds, [
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Secret",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
  ]);
  const urlKinds = clusterManifests({ target: { kind: "url", baseUrl: "https://f.example" }, subject: { kind: "User", name: "x" } }).map((o) => o.kind);
  assert.not.ok(urlKinds.includes("Deployment"));
});

Relay("the webhook configurations address the relay's service with its CA", () => {
  const objects = render();
  for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
    const [webhook] = find(objects, kind, "gmsa-admission").webhooks;
    assert.equal(webhook.clientConfig.service, { namespace: "gmsa-admission", name: relayName, path: kind.startsWith("Mutating") ? "/mutate" : "/validate", port: 443 });
    assert.is(Buffer.from(webhook.clientConfig.caBundle, "base64").toString(), certificate.caPem);
  }
  const credSpecWebhook = find(objects, "ValidatingWebhookConfiguration", "gmsa-admission").webhooks[1];
  assert.equal(credSpecWebhook.clientConfig.service, { namespace: "gmsa-admission", name: relayName, path: "/validate-credspec", port: 443 });
  const service = find(objects, "Service");
  assert.equal(service.spec.ports, [{ name: "https", port: 443, targetPort: "https", protocol: "TCP" }]);
});

Relay("the Deployment is two spread replicas of a pinned stock nginx on Linux nodes, with a disruption budget", () => {
  const objects = render();
  const deployment = find(objects, "Deployment");
  assert.is(deployment.spec.replicas, 2);
  const pod = deployment.spec.template.spec;
  assert.equal(pod.nodeSelector, { "kubernetes.io/os": "linux" });
  assert.ok(pod.topologySpreadConstraints.some((c: any) => c.topologyKey === "kubernetes.io/hostname" && c.whenUnsatisfiable === "DoNotSchedule"));
  const [container] = pod.containers;
  assert.is(container.image, relayDefaultImage);
  assert.match(container.image, /^docker\.io\/nginxinc\/nginx-unprivileged:\d+\.\d+\.\d+-alpine$/);
  assert.ok(container.resources.requests.cpu && container.resources.requests.memory && container.resources.limits.cpu && container.resources.limits.memory);
  assert.equal(find(objects, "PodDisruptionBudget").spec, { minAvailable: 1, selector: deployment.spec.selector });
});

Relay("the relay runs locked down: non-root, read-only root, no capabilities, RuntimeDefault seccomp, no token", () => {
  const objects = render();
  const pod = find(objects, "Deployment").spec.template.spec;
  const [container] = pod.containers;
  assert.is(pod.securityContext.runAsNonRoot, true);
  assert.ok(pod.securityContext.runAsUser > 0);
  assert.equal(pod.securityContext.seccompProfile, { type: "RuntimeDefault" });
  assert.equal(container.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
  assert.is(pod.automountServiceAccountToken, false);
  assert.is(find(objects, "ServiceAccount").automountServiceAccountToken, false);
  assert.is(pod.serviceAccountName, relayName);
  // No RBAC names the relay's service account.
  assert.not.ok(objects.some((o) => (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") && JSON.stringify(o).includes(relayName)));
  // nginx writes only to the emptyDir it is given.
  const writable = container.volumeMounts.filter((m: any) => !m.readOnly).map((m: any) => m.mountPath);
  assert.equal(writable, ["/tmp"]);
  assert.ok(pod.volumes.find((v: any) => v.name === "run").emptyDir);
});

Relay("nginx forwards only /mutate, /validate and /validate-credspec, to the function by name, verifying it, with the key from the Secret", () => {
  const conf = nginxConf(render());
  assert.match(conf, /location ~ \^\/\(mutate\|validate\|validate-credspec\)\$ \{/);
  assert.match(conf, /location \/ \{\s*return 404;/);
  assert.match(conf, /proxy_pass https:\/\/\$function_upstream\$request_uri;/);
  assert.match(conf, /set \$function_upstream "func-gmsa\.azurewebsites\.net:443";/);
  assert.match(conf, /proxy_set_header Host "func-gmsa\.azurewebsites\.net";/);
  assert.match(conf, /proxy_ssl_server_name on;/);
  assert.match(conf, /proxy_ssl_name func-gmsa\.azurewebsites\.net;/);
  assert.match(conf, /proxy_ssl_verify on;/);
  assert.match(conf, /proxy_ssl_trusted_certificate \/etc\/ssl\/certs\/ca-certificates\.crt;/);
  assert.match(conf, /include \/etc\/nginx\/relay-function-key\/function-key\.conf;/);
});

Relay("the function key is in a Secret, never in the ConfigMap or the Deployment", () => {
  const objects = render();
  for (const kind of ["ConfigMap", "Deployment"]) assert.not.ok(JSON.stringify(find(objects, kind)).includes(relay.functionKey), kind);
  const secret = find(objects, "Secret", `${relayName}-function-key`);
  assert.is(Buffer.from(secret.data["function-key.conf"], "base64").toString(), `proxy_set_header x-functions-key "${relay.functionKey}";\n`);
});

Relay("timeouts sit a little under the webhook's timeoutSeconds", () => {
  for (const [seconds, connect, readSend] of [
    [5, 2000, 4500],
    [1, 500, 500],
    [30, 2000, 29500],
  ] as const) {
    const conf = nginxConf(render({}, seconds));
    assert.match(conf, new RegExp(`proxy_connect_timeout ${connect}ms;`));
    assert.match(conf, new RegExp(`proxy_read_timeout ${readSend}ms;`));
    assert.match(conf, new RegExp(`proxy_send_timeout ${readSend}ms;`));
    assert.is(find(render({}, seconds), "MutatingWebhookConfiguration", "gmsa-admission").webhooks[0].timeoutSeconds, seconds);
  }
});

Relay("a new certificate, key or function changes the pod template's checksum; the same inputs keep it", () => {
  const checksum = (objects: KubernetesObject[]) => find(objects, "Deployment").spec.template.metadata.annotations[relayChecksumAnnotation];
  const base = checksum(render());
  assert.is(checksum(render()), base);
  assert.is.not(checksum(render({ certificate: { ...certificate, certPem: "-----OTHER-----\n" } })), base);
  assert.is.not(checksum(render({ functionKey: "another-key-0123456789" })), base);
  assert.is.not(checksum(render({ function: { host: "other.azurewebsites.net", port: 443 } })), base);
});

Relay("the namespace opts out of the webhooks and enforces the restricted pod security profile", () => {
  const labels = find(render(), "Namespace", "gmsa-admission").metadata.labels;
  assert.is(labels["windows.k8s.io/disabled"], "true");
  assert.is(labels["pod-security.kubernetes.io/enforce"], "restricted");
});

const Certificate = suite("relay certificate");

Certificate("is issued for the service's names and kept while it fits", async () => {
  const issued = await issueRelayCertificate("gmsa-admission");
  assert.ok(await reusableRelayCertificate(issued, "gmsa-admission"));
  assert.not.ok(await reusableRelayCertificate(issued, "elsewhere"), "another namespace needs another certificate");
  const nearlyExpired = new Date(Date.now() + 800 * 24 * 3600 * 1000);
  assert.not.ok(await reusableRelayCertificate(issued, "gmsa-admission", nearlyExpired), "renewed when its end is near");
  const other = await issueRelayCertificate("gmsa-admission");
  assert.not.ok(await reusableRelayCertificate({ ...issued, caPem: other.caPem }, "gmsa-admission"), "a CA that did not sign it");
  assert.not.ok(await reusableRelayCertificate({ caPem: issued.caPem, certPem: issued.certPem }, "gmsa-admission"), "no key");
});

Relay.run();
Certificate.run();
