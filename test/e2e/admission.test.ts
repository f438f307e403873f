import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { startLocalWebhook } from "../support/localWebhook.js";
import { credSpecFixture } from "../support/fixtures.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { gmsa, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * The product through a real kube-apiserver: it calls the webhooks over TLS, applies their
 * patches, enforces their denials, and real RBAC decides `use`.
 */
const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const payroll = canonicalJson(credSpecFixture("payroll-gmsa").credspec);
const ns = "e2e";

const E2e = suite<{ cluster: E2eCluster }>("end to end through kube-apiserver");

// uvu reports nothing of a failing hook: say what went wrong before it swallows it.
E2e.before(async (context) => {
  try {
    await setUp(context);
  } catch (error) {
    console.error("end-to-end set-up failed:", error);
    throw error;
  }
});

async function setUp(context: { cluster: E2eCluster }): Promise<void> {
  context.cluster = await startE2eCluster();
  await context.cluster.apply([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "opted-out", labels: { "windows.k8s.io/disabled": "true" } } },
    // What operator scaffolding puts on its namespaces: no reason to skip the checks.
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "operator-system", labels: { "control-plane": "controller-manager" } } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "manager", namespace: "operator-system" } },
    ...["web", "payroll", "nobody"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: ns } })),
    ...useGrant({ name: "use-webapp1", namespace: ns, credSpecs: ["webapp1-credspec"], serviceAccount: "web" }),
    ...useGrant({ name: "use-payroll", namespace: ns, credSpecs: ["payroll-gmsa", "empty-credspec", "no-such-spec"], serviceAccount: "payroll" }),
  ]);
}

E2e.after(async (context) => {
  await context.cluster?.close();
});

let counter = 0;
function windowsPod(serviceAccountName: string, edit: (p: PodSpec) => void = () => {}): PodSpec {
  const p: PodSpec = {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { name: `pod-${++counter}`, namespace: ns },
    spec: { serviceAccountName, containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
  edit(p);
  return p;
}

async function create(cluster: E2eCluster, p: PodSpec): Promise<KubeReply> {
  return kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${p.metadata.namespace ?? ns}/pods`, p);
}

async function created(cluster: E2eCluster, p: PodSpec): Promise<any> {
  const reply = await create(cluster, p);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  return reply.body;
}

function refusal(reply: KubeReply, code: number, message: RegExp): void {
  assert.is(reply.status, code, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "(mutate|validate)\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.match(reply.body.message, message);
}

E2e("expands a pod-level name with the byte-exact contents", async ({ cluster }) => {
  const pod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  assert.is(pod.spec.securityContext.windowsOptions.gmsaCredentialSpec, webapp);
});

E2e("a GMSA pod of a workload whose hostname passes 15 characters is admitted with a warning kubectl prints", async ({ cluster }) => {
  const replica = windowsPod("web", (p) => {
    p.metadata = { generateName: "webapp-7d9c8b5f6-", namespace: ns } as PodSpec["metadata"];
    p.spec.securityContext = gmsa("webapp1-credspec");
  });
  const reply = await create(cluster, replica);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.ok(
    reply.warnings.some((warning) => /longer than 15 characters, and Windows uses only its first 15 as the NetBIOS name/.test(warning)),
    reply.warnings.join("\n"),
  );
  const short = await create(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  assert.equal(short.warnings, [], "a pod of its own with a short name: no warning");
});

E2e("expands container, init container and several containers, each with its own spec", async ({ cluster }) => {
  const pod = await created(
    cluster,
    windowsPod("payroll", (p) => {
      p.spec.containers[0]!.securityContext = gmsa("payroll-gmsa");
      p.spec.containers.push({ name: "second", image: "x", securityContext: gmsa("payroll-gmsa") });
      p.spec.initContainers = [{ name: "setup", image: "x", securityContext: gmsa("payroll-gmsa") }];
    }),
  );
  assert.is(pod.spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpec, payroll);
  assert.is(pod.spec.containers[1].securityContext.windowsOptions.gmsaCredentialSpec, payroll);
  assert.is(pod.spec.initContainers[0].securityContext.windowsOptions.gmsaCredentialSpec, payroll);
});

E2e("keeps pre-set contents that match, as they were written", async ({ cluster }) => {
  const pretty = JSON.stringify(credSpecFixture("webapp1-credspec").credspec, null, 2);
  const pod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec", pretty))),
  );
  assert.is(pod.spec.securityContext.windowsOptions.gmsaCredentialSpec, pretty);
});

E2e("refuses an unknown credential spec", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("payroll", (p) => (p.spec.securityContext = gmsa("no-such-spec"))),
    ),
    422,
    /GMSACredentialSpec "no-such-spec" does not exist/,
  );
});

E2e("tells a service account that may not use a spec nothing about whether it exists", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("web", (p) => (p.spec.securityContext = gmsa("no-such-spec"))),
    ),
    403,
    /is not authorized to use GMSACredentialSpec "no-such-spec"/,
  );
});

E2e("refuses a credential spec without contents", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("payroll", (p) => (p.spec.securityContext = gmsa("empty-credspec"))),
    ),
    422,
    /has no credspec object/,
  );
});

E2e("refuses a service account that may not use the credential spec", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("web", (p) => (p.spec.containers[0]!.securityContext = gmsa("payroll-gmsa"))),
    ),
    403,
    /container "app" of pod "pod-\d+": service account "web" in namespace "e2e" is not authorized to use GMSACredentialSpec "payroll-gmsa"/,
  );
});

E2e("refuses contents without a name", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("web", (p) => (p.spec.securityContext = gmsa(undefined, webapp))),
    ),
    422,
    /contents are set without a credential spec name/,
  );
});

E2e("refuses contents that do not match the named spec", async ({ cluster }) => {
  refusal(
    await create(
      cluster,
      windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec", payroll))),
    ),
    422,
    /do not match GMSACredentialSpec "webapp1-credspec"/,
  );
});

E2e("expands the legacy annotations and warns the client", async ({ cluster }) => {
  const reply = await create(
    cluster,
    windowsPod("web", (p) => (p.metadata.annotations = { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" })),
  );
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(reply.body.metadata.annotations["app.container.alpha.windows.kubernetes.io/gmsa-credential-spec"], webapp);
  assert.ok(
    reply.warnings.some((w) =>
      /annotation app\.container\.alpha\.windows\.kubernetes\.io\/gmsa-credential-spec-name is deprecated; use spec\.containers\[0\]\.securityContext\.windowsOptions\.gmsaCredentialSpecName/.test(
        w,
      ),
    ),
    JSON.stringify(reply.warnings),
  );
});

E2e("GMSA settings cannot change on update, other updates pass", async ({ cluster }) => {
  const pod = await created(
    cluster,
    windowsPod("web", (p) => (p.metadata.annotations = { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" })),
  );
  const path = `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`;
  const relabel = await kubeRequest(cluster.admin, "PATCH", path, { metadata: { labels: { tier: "web" } } }, "application/merge-patch+json");
  assert.is(relabel.status, 200, JSON.stringify(relabel.body));
  const change = await kubeRequest(
    cluster.admin,
    "PATCH",
    path,
    { metadata: { annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" } } },
    "application/merge-patch+json",
  );
  refusal(change, 403, /GMSA settings cannot be changed on an existing pod/);
  const remove = await kubeRequest(
    cluster.admin,
    "PATCH",
    path,
    { metadata: { annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec": null } } },
    "application/merge-patch+json",
  );
  refusal(remove, 403, /contents for GMSACredentialSpec "webapp1-credspec" would disappear/);
  const throughStatus = await kubeRequest(
    cluster.admin,
    "PATCH",
    `${path}/status`,
    { metadata: { annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" } } },
    "application/merge-patch+json",
  );
  refusal(throughStatus, 403, /GMSA settings cannot be changed on an existing pod/);
});

E2e("an ephemeral container naming a spec the service account may not use is refused", async ({ cluster }) => {
  const pod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  const path = `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/ephemeralcontainers`;
  const debug = (name: string, spec: string) => ({
    spec: { ephemeralContainers: [{ name, image: "mcr.microsoft.com/windows/nanoserver:ltsc2022", securityContext: gmsa(spec) }] },
  });
  refusal(await kubeRequest(cluster.admin, "PATCH", path, debug("debug", "payroll-gmsa"), "application/strategic-merge-patch+json"), 403, /ephemeral container "debug"/);
  const allowed = await kubeRequest(cluster.admin, "PATCH", path, debug("debug2", "webapp1-credspec"), "application/strategic-merge-patch+json");
  assert.is(allowed.status, 200, JSON.stringify(allowed.body));
  assert.is(allowed.body.spec.ephemeralContainers[0].securityContext.windowsOptions.gmsaCredentialSpec, webapp);
});

E2e("a namespace labelled control-plane gets the same checks as any other", async ({ cluster }) => {
  const inOperatorNamespace = (edit: (p: PodSpec) => void) => {
    const p = windowsPod("manager", edit);
    p.metadata.namespace = "operator-system";
    return p;
  };
  refusal(
    await create(
      cluster,
      inOperatorNamespace((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    ),
    403,
    /service account "manager" in namespace "operator-system" is not authorized to use GMSACredentialSpec "webapp1-credspec"/,
  );
  refusal(
    await create(
      cluster,
      inOperatorNamespace((p) => (p.metadata.annotations = { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" })),
    ),
    403,
    /is not authorized to use GMSACredentialSpec "payroll-gmsa"/,
  );
});

function binding(podName: string, annotations?: Record<string, string>) {
  return {
    apiVersion: "v1",
    kind: "Binding",
    metadata: { name: podName, ...(annotations ? { annotations } : {}) },
    target: { apiVersion: "v1", kind: "Node", name: "windows-node-1" },
  };
}

const admissionLines = (cluster: E2eCluster) => cluster.webhook.logs.filter((l) => l.includes("gmsa.admission")).length;

E2e("a Binding that carries a GMSA annotation goes to the validating webhook and is refused; the pod keeps its settings", async ({ cluster }) => {
  const pod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  const before = admissionLines(cluster);
  const reply = await kubeRequest(
    cluster.admin,
    "POST",
    `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/binding`,
    binding(pod.metadata.name, { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "payroll-gmsa" }),
  );
  assert.ok(reply.status >= 400, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.is(admissionLines(cluster), before + 1, "the validating webhook saw the Binding");
  const after = (await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`)).body;
  assert.is(after.spec.nodeName, undefined, "not bound");
  assert.is(after.metadata.annotations?.["pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name"], undefined, "no GMSA annotation copied onto the pod");

  // The older spelling of the same endpoint.
  const legacy = await kubeRequest(
    cluster.admin,
    "POST",
    `/api/v1/namespaces/${ns}/bindings`,
    binding(pod.metadata.name, { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec": "{}" }),
  );
  assert.ok(legacy.status >= 400, JSON.stringify(legacy.body));
  assert.match(legacy.body.message, /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
});

E2e("a Binding that carries a GMSA annotation is refused as a change of GMSA settings (403)", async ({ cluster }) => {
  const pod = await created(cluster, windowsPod("web"));
  const reply = await kubeRequest(
    cluster.admin,
    "POST",
    `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/binding`,
    binding(pod.metadata.name, { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" }),
  );
  assert.is(reply.status, 403, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "validate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
});

E2e("a Binding without GMSA annotations — every scheduling — never reaches the webhook", async ({ cluster }) => {
  const gmsaPod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  const plainPod = await created(cluster, windowsPod("web"));
  const before = admissionLines(cluster);
  for (const [pod, annotations] of [
    [gmsaPod, { "scheduler.example/zone": "a" }],
    [plainPod, undefined],
  ] as const) {
    const reply = await kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/binding`, binding(pod.metadata.name, annotations));
    assert.is(reply.status, 201, JSON.stringify(reply.body));
  }
  assert.is(admissionLines(cluster), before, "the webhook saw none of them");
  const bound = (await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods/${gmsaPod.metadata.name}`)).body;
  assert.is(bound.spec.nodeName, "windows-node-1");
});

E2e("a pod without GMSA settings never reaches the webhook", async ({ cluster }) => {
  cluster.webhook.logs.length = 0;
  const plain = await created(cluster, windowsPod("web"));
  const opted = await created(cluster, {
    ...windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    metadata: { name: "skipped", namespace: "opted-out" },
    spec: { containers: [{ name: "a", image: "x", securityContext: gmsa("webapp1-credspec") }] },
  });
  assert.ok(plain.metadata.uid && opted.metadata.uid);
  assert.equal(
    cluster.webhook.logs.filter((l) => l.includes("gmsa.admission")),
    [],
  );
  const gmsaPod = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  assert.ok(gmsaPod);
  assert.is(cluster.webhook.logs.filter((l) => l.includes("gmsa.admission")).length, 2, "mutate and validate saw the GMSA pod");
});

E2e("a Deployment's pods are expanded as they are created by the controllers", async ({ cluster }) => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "webapp", namespace: ns },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "webapp" } },
      template: {
        metadata: { labels: { app: "webapp" } },
        spec: { serviceAccountName: "web", securityContext: gmsa("webapp1-credspec"), containers: [{ name: "iis", image: "x" }] },
      },
    },
  };
  const reply = await kubeRequest(cluster.admin, "POST", `/apis/apps/v1/namespaces/${ns}/deployments`, deployment);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  let pods: any[] = [];
  for (let i = 0; i < 100 && pods.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 300));
    pods = (await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods?labelSelector=app%3Dwebapp`)).body.items;
  }
  assert.is(pods.length, 1, "the ReplicaSet created its pod");
  assert.is(pods[0].spec.securityContext.windowsOptions.gmsaCredentialSpec, webapp);
});

E2e("v1alpha1 and v1 credential specs are the same objects in both versions", async ({ cluster }) => {
  const created = await kubeRequest(cluster.admin, "POST", "/apis/windows.k8s.io/v1alpha1/gmsacredentialspecs", {
    apiVersion: "windows.k8s.io/v1alpha1",
    kind: "GMSACredentialSpec",
    metadata: { name: "legacy-alpha" },
    credspec: credSpecFixture("webapp1-credspec").credspec,
  });
  assert.is(created.status, 201, JSON.stringify(created.body));
  assert.ok(
    created.warnings.some((w) => /deprecated/.test(w)),
    "clients of v1alpha1 are warned",
  );
  const asV1 = await kubeRequest(cluster.admin, "GET", "/apis/windows.k8s.io/v1/gmsacredentialspecs/legacy-alpha");
  assert.is(asV1.body.apiVersion, "windows.k8s.io/v1");
  const asAlpha = await kubeRequest(cluster.admin, "GET", "/apis/windows.k8s.io/v1alpha1/gmsacredentialspecs/webapp1-credspec");
  assert.is(asAlpha.body.apiVersion, "windows.k8s.io/v1alpha1");
  assert.equal(asAlpha.body.credspec, credSpecFixture("webapp1-credspec").credspec);
});

E2e("with the webhook down, GMSA pods are refused and other pods are unaffected", async ({ cluster }) => {
  const running = await created(
    cluster,
    windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
  );
  await cluster.webhook.close();
  try {
    // Labels, finalizers and status of running GMSA pods do not wait on the webhook.
    const relabel = await kubeRequest(
      cluster.admin,
      "PATCH",
      `/api/v1/namespaces/${ns}/pods/${running.metadata.name}`,
      { metadata: { labels: { moved: "yes" } } },
      "application/merge-patch+json",
    );
    assert.is(relabel.status, 200, JSON.stringify(relabel.body));
    const refused = await create(
      cluster,
      windowsPod("web", (p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
    );
    assert.is(refused.status, 500, JSON.stringify(refused.body));
    assert.match(refused.body.message, /failed calling webhook "mutate\.gmsa-admission\.windows\.k8s\.io"/);
    const unscheduled = await created(cluster, windowsPod("web"));
    // Scheduling never waits on the webhook, whether or not the pod has GMSA settings.
    for (const pod of [unscheduled, running]) {
      const bound = await kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/binding`, binding(pod.metadata.name));
      assert.is(bound.status, 201, JSON.stringify(bound.body));
    }
  } finally {
    cluster.webhook = await startLocalWebhook(cluster.webhookEnv, { port: cluster.webhookPort, tls: cluster.webhook.tls });
  }
});

E2e.run();
