import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterManifests, type KubernetesObject } from "../../cluster/manifests.js";
import { relayChecksumAnnotation, relayDefaultImage, relayName, type RelayWiring } from "../../cluster/relay.js";
import { relayUpstreamTimeouts } from "../../cluster/relayNginxConf.js";
import { excludedNamespaceLabel } from "../../cluster/webhookConfigurations.js";
import { relayLimits, relayMemoryBudget } from "../../cluster/relayLimits.js";
import { answerMarginMs } from "../../lib/admission/handleReview.js";
import { maxBodyBytes } from "../../lib/admission/httpExchange.js";
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
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "PriorityLevelConfiguration",
    "FlowSchema",
    "PriorityClass",
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Secret",
    "Service",
    "NetworkPolicy",
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

Relay("nginx forwards exactly /mutate, /validate and /validate-credspec, to the function by name, verifying it, with the key from the Secret", () => {
  const conf = nginxConf(render());
  // Exact locations match the normalised path; the upstream path is written out, never the client's.
  for (const path of ["mutate", "validate", "validate-credspec"]) {
    assert.match(conf, new RegExp(`location = /${path} \\{[^}]*proxy_pass https://gmsa_function/${path}\\$function_query;`));
  }
  assert.not.match(conf, /\$request_uri|\$uri\b[^"]*;\s*$|location ~/m);
  assert.match(conf, /location \/ \{\s*return 404;/);
  assert.equal(conf.match(/proxy_pass .*/g), [
    "proxy_pass https://gmsa_function/mutate$function_query;",
    "proxy_pass https://gmsa_function/validate$function_query;",
    "proxy_pass https://gmsa_function/validate-credspec$function_query;",
  ]);
  assert.match(conf, /map \$arg_timeout \$function_query \{\s*"~\^[^"]+" "\?timeout=\$arg_timeout";\s*default "";\s*\}/);
  assert.match(conf, /upstream gmsa_function \{\s*zone gmsa_function 64k;\s*server func-gmsa\.azurewebsites\.net:443 max_fails=0 resolve;\s*keepalive \d+;/);
  assert.match(conf, /proxy_set_header Host "func-gmsa\.azurewebsites\.net";/);
  assert.match(conf, /proxy_ssl_server_name on;/);
  assert.match(conf, /proxy_ssl_name func-gmsa\.azurewebsites\.net;/);
  assert.match(conf, /proxy_ssl_verify on;/);
  assert.match(conf, /proxy_ssl_trusted_certificate \/etc\/ssl\/certs\/ca-certificates\.crt;/);
  assert.match(conf, /include \/etc\/nginx\/relay-function-key\/function-key\.conf;/);
});

Relay("only the headers the function needs are sent on: the client's are not passed", () => {
  const conf = nginxConf(render());
  assert.match(conf, /proxy_pass_request_headers off;/);
  const sent = [...conf.matchAll(/proxy_set_header (\S+) /g)].map((m) => m[1]);
  assert.equal(sent, ["Host", "Connection", "Content-Type"]);
  // Keep-alive to the function needs HTTP/1.1 without "Connection: close".
  assert.match(conf, /proxy_http_version 1\.1;/);
  assert.match(conf, /proxy_set_header Connection "";/);
});

Relay("the ?timeout= passed on is a Go duration or nothing", () => {
  const pattern = /"~(\^[^"]+)" "\?timeout=/.exec(nginxConf(render()))?.[1];
  assert.ok(pattern);
  const goDuration = new RegExp(pattern.replace(/\\\\/g, "\\"));
  for (const ok of ["5s", "30s", "1m0s", "500ms", "1.5s", "10s"]) assert.ok(goDuration.test(ok), ok);
  for (const bad of ["", "5", "5s&x=1", "5s%26x", "1s/../metrics", "5s ", "-5s", "5s\n", "5%73"]) assert.not.ok(goDuration.test(bad), bad);
});

Relay("the function key is in a Secret, never in the ConfigMap or the Deployment", () => {
  const objects = render();
  for (const kind of ["ConfigMap", "Deployment"]) assert.not.ok(JSON.stringify(find(objects, kind)).includes(relay.functionKey), kind);
  const secret = find(objects, "Secret", `${relayName}-function-key`);
  assert.is(Buffer.from(secret.data["function-key.conf"], "base64").toString(), `proxy_set_header x-functions-key "${relay.functionKey}";\n`);
});

Relay("for every timeoutSeconds the relay waits longer than the function's budget and less than the API server", () => {
  for (let seconds = 1; seconds <= 30; seconds++) {
    const apiServerMs = seconds * 1000;
    // What the function allows itself for the API server's ?timeout=<seconds>s (handleReview.ts).
    const functionBudgetMs = apiServerMs - answerMarginMs;
    const { readMs, connectMs } = relayUpstreamTimeouts(seconds);
    assert.ok(readMs >= functionBudgetMs + 100, `${seconds} s: the relay waits ${readMs} ms, the function may take ${functionBudgetMs} ms`);
    assert.ok(readMs < apiServerMs, `${seconds} s: the relay gives up before the API server`);
    assert.ok(connectMs <= readMs && connectMs <= 2000);
    const objects = render({}, seconds);
    const conf = nginxConf(objects);
    assert.match(conf, new RegExp(`proxy_read_timeout ${readMs}ms;`));
    assert.match(conf, new RegExp(`proxy_send_timeout ${readMs}ms;`));
    assert.match(conf, new RegExp(`proxy_connect_timeout ${connectMs}ms;`));
    assert.is(find(objects, "MutatingWebhookConfiguration", "gmsa-admission").webhooks[0].timeoutSeconds, seconds);
  }
});

Relay("the relay's worst case fits its memory limit, term by term", () => {
  const objects = render();
  const conf = nginxConf(objects);
  const l = relayLimits;
  const budget = relayMemoryBudget();
  assert.ok(budget.totalMiB < l.memoryLimitMiB, `${budget.totalMiB} MiB in the worst case, ${l.memoryLimitMiB} MiB allowed`);
  // Each term of the arithmetic is what the config and the Deployment actually say.
  assert.match(conf, new RegExp(`worker_processes ${l.workerProcesses};`));
  assert.match(conf, new RegExp(`worker_connections ${l.workerConnections};`));
  assert.match(conf, new RegExp(`client_body_buffer_size ${l.bodyBufferBytes};`));
  assert.match(conf, new RegExp(`client_max_body_size ${maxBodyBytes};`));
  assert.match(conf, new RegExp(`large_client_header_buffers ${l.largeHeaderBuffers.count} ${l.largeHeaderBuffers.bytes};`));
  assert.ok(l.bodyBufferBytes < l.maxBodyBytes, "larger bodies spill to the bounded temp directory");
  for (const path of ["/mutate", "/validate"]) {
    const block = new RegExp(`location = ${path} \\{([^}]*)\\}`).exec(conf)?.[1] ?? "";
    assert.match(block, new RegExp(`limit_conn relay_total ${l.requestsInFlight};`));
    assert.match(block, new RegExp(`limit_conn relay_per_client ${l.requestsInFlightPerClient};`));
  }
  assert.ok(l.requestsInFlight < l.workerConnections / 2, "each request in flight may hold a function connection too");
  for (const directive of ["client_header_timeout", "client_body_timeout", "send_timeout", "keepalive_timeout"]) assert.match(conf, new RegExp(`${directive} \\d+s;`));
  const pod = find(objects, "Deployment").spec.template.spec;
  assert.is(pod.containers[0].resources.limits.memory, `${l.memoryLimitMiB}Mi`);
  const run = pod.volumes.find((v: any) => v.name === "run").emptyDir;
  assert.equal(run, { medium: "Memory", sizeLimit: `${l.tempSizeLimitMiB}Mi` });
  assert.match(conf, /client_body_temp_path \/tmp\/client-body;/);
  // The arithmetic is written down where the operator sees it.
  assert.match(conf, new RegExp(`# +${budget.totalMiB.toFixed(1)} MiB +in all`));
});

Relay("the relay is scheduled ahead of ordinary workloads, also on AKS system pools", () => {
  const objects = render();
  const pod = find(objects, "Deployment").spec.template.spec;
  const priorityClass = find(objects, "PriorityClass", pod.priorityClassName);
  assert.not.match(pod.priorityClassName, /^system-/, "the system classes belong to kube-system");
  assert.ok(priorityClass.value > 0 && priorityClass.value <= 1_000_000_000, "the highest value a class that is not a system one may have");
  assert.not.ok(priorityClass.globalDefault, "never the default class of every pod");
  assert.ok(pod.tolerations.some((t: any) => t.key === "CriticalAddonsOnly" && t.operator === "Exists" && t.effect === undefined));
});

Relay("the NetworkPolicy admits only the konnectivity agents, on the https port, by default", () => {
  const objects = render();
  const policy = find(objects, "NetworkPolicy");
  const deployment = find(objects, "Deployment");
  assert.is(policy.metadata.namespace, "gmsa-admission");
  assert.equal(policy.spec.podSelector, deployment.spec.selector);
  assert.equal(policy.spec.policyTypes, ["Ingress"]);
  assert.equal(policy.spec.ingress, [
    {
      from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { app: "konnectivity-agent" } } }],
      ports: [{ protocol: "TCP", port: "https" }],
    },
  ]);
  assert.ok(
    deployment.spec.template.spec.containers[0].ports.some((p: any) => p.name === "https"),
    "the port the policy names is the container's",
  );
  const kinds = objects.map((o) => o.kind);
  assert.ok(kinds.indexOf("NetworkPolicy") < kinds.indexOf("Deployment"), "in force before the pods start");
});

Relay("the NetworkPolicy admits the API server's subnet when asked, with or without konnectivity", () => {
  const policy = find(render({ allowFrom: [{ kind: "cidr", cidr: "10.224.0.0/28" }, { kind: "konnectivity" }, { kind: "cidr", cidr: "fd00::/64" }] }), "NetworkPolicy");
  assert.equal(
    policy.spec.ingress[0].from.map((peer: any) => peer.ipBlock?.cidr ?? peer.podSelector.matchLabels.app),
    ["10.224.0.0/28", "konnectivity-agent", "fd00::/64"],
  );
  const onlySubnet = find(render({ allowFrom: [{ kind: "cidr", cidr: "10.224.0.0/28" }] }), "NetworkPolicy");
  assert.equal(onlySubnet.spec.ingress[0].from, [{ ipBlock: { cidr: "10.224.0.0/28" } }]);
});

Relay("a NetworkPolicy with no allowed source admits nobody, never everybody", () => {
  // An ingress rule whose `from` is empty matches every source.
  const policy = find(render({ allowFrom: [] }), "NetworkPolicy");
  assert.equal(policy.spec.policyTypes, ["Ingress"]);
  assert.equal(policy.spec.ingress, []);
});

Relay("a new certificate, key or function changes the pod template's checksum; the same inputs keep it", () => {
  const checksum = (objects: KubernetesObject[]) => find(objects, "Deployment").spec.template.metadata.annotations[relayChecksumAnnotation];
  const base = checksum(render());
  assert.is(checksum(render()), base);
  assert.is.not(checksum(render({ certificate: { ...certificate, certPem: "-----OTHER-----\n" } })), base);
  assert.is.not(checksum(render({ functionKey: "another-key-0123456789" })), base);
  assert.is.not(checksum(render({ function: { host: "other.azurewebsites.net", port: 443 } })), base);
});

Relay("the namespace is not opted out of the webhooks and enforces the restricted pod security profile", () => {
  const labels = find(render(), "Namespace", "gmsa-admission").metadata.labels;
  assert.is(labels[excludedNamespaceLabel.key], undefined, "the matchConditions keep the relay's pods away; the checks stay on for anything else there");
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
