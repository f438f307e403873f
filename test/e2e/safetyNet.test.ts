import { KubeConfig } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { canaryNamespace } from "../../cluster/canary.js";
import { safetyNetObjects, safetyNetPolicyNames } from "../../lib/wiring/safetyNet.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";

/**
 * The in-cluster safety net through a real kube-apiserver, with no webhook to call: the API
 * server's own ValidatingAdmissionPolicies hold the `use` rule, names, contents without a name,
 * and the freeze of GMSA settings on running pods. Each refusal is shown to be the policy's: the
 * last test takes the policies away and the same requests go through.
 */
interface Context {
  controlPlane?: ControlPlane;
  admin: KubeConfig;
}

const Net = suite<Context>("the in-cluster safety net through a real API server", {} as Context);

const namespace = "apps";
const spec = "webapp1";

function gmsaPod(name: string, options: { serviceAccount: string; credSpec?: string; contents?: string; annotations?: Record<string, string> }) {
  const windowsOptions = {
    ...(options.credSpec === undefined ? {} : { gmsaCredentialSpecName: options.credSpec }),
    ...(options.contents === undefined ? {} : { gmsaCredentialSpec: options.contents }),
  };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, ...(options.annotations ? { annotations: options.annotations } : {}) },
    spec: {
      serviceAccountName: options.serviceAccount,
      containers: [
        {
          name: "app",
          image: "mcr.microsoft.com/windows/servercore:ltsc2022",
          ...(Object.keys(windowsOptions).length > 0 ? { securityContext: { windowsOptions } } : {}),
        },
      ],
    },
  };
}

const create = (context: Context, pod: unknown): Promise<KubeReply> => kubeRequest(context.admin, "POST", `/api/v1/namespaces/${namespace}/pods`, pod);

function refusedBy(reply: KubeReply, words: RegExp | string): void {
  const body = reply.body as { message?: string };
  assert.ok(reply.status >= 400 && reply.status < 500, `expected a refusal, got ${reply.status}: ${JSON.stringify(reply.body).slice(0, 400)}`);
  assert.match(body.message ?? "", /the in-cluster policy of gmsa-admission/, body.message);
  assert.match(body.message ?? "", words, body.message);
}

Net.before(async (context) => {
  try {
    context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
    context.admin = new KubeConfig();
    context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
    const objects: KubernetesObject[] = [
      credSpecCrd(),
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "allowed", namespace } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "denied", namespace } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "revocable", namespace } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "use-webapp1-revocable", namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "use-webapp1" },
        subjects: [{ kind: "ServiceAccount", name: "revocable", namespace }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "use-webapp1", namespace },
        rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], resourceNames: [spec, "webapp2", "webapp3"], verbs: ["use"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "use-webapp1", namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "use-webapp1" },
        subjects: [{ kind: "ServiceAccount", name: "allowed", namespace }],
      },
      ...(safetyNetObjects({ authorizeRequestingUser: false }) as KubernetesObject[]),
    ];
    await applyObjects(context.admin, objects);
    // The API server compiles a new policy and starts enforcing it a moment after it is stored.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const probe = await create(context, gmsaPod(`probe-${Date.now()}`, { serviceAccount: "denied", credSpec: spec }));
      if (probe.status >= 400) break;
      if (Date.now() > deadline) throw new Error("the safety net was not enforced within 20 s");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Each policy is loaded on its own: the bindings' too, or a test of it could run before it holds.
    for (let i = 0; ; i++) {
      const probe = `binding-probe-${i}`;
      assert.is((await create(context, gmsaPod(probe, { serviceAccount: "denied" }))).status, 201);
      const bound = await kubeRequest(context.admin, "POST", `/api/v1/namespaces/${namespace}/pods/${probe}/binding`, {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name: probe, annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": spec } },
        target: { apiVersion: "v1", kind: "Node", name: "node-1" },
      });
      if (bound.status >= 400) break;
      if (Date.now() > deadline) throw new Error("the bindings' policy was not enforced within 20 s");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } catch (error) {
    console.error("safety net set-up failed:", error);
    throw error;
  }
});

Net.after(async (context) => {
  await context.controlPlane?.stop();
});

Net("the policies compiled: no type-check warning on either", async (context) => {
  for (const name of safetyNetPolicyNames) {
    const policy = await kubeRequest(context.admin, "GET", `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${name}`);
    assert.is(policy.status, 200);
    const status = (policy.body as { status?: { typeChecking?: { expressionWarnings?: unknown[] } } }).status;
    assert.equal(status?.typeChecking?.expressionWarnings ?? [], [], `${name}: ${JSON.stringify(status)}`);
  }
});

Net("no webhook: a pod whose service account may not use the spec is refused, in the function's words", async (context) => {
  const reply = await create(context, gmsaPod("denied-0", { serviceAccount: "denied", credSpec: spec }));
  assert.is(reply.status, 403);
  refusedBy(reply, `service account "denied" in namespace "${namespace}" is not authorized to use GMSACredentialSpec "${spec}"`);
});

Net("no webhook: the same through an init container and through the alpha annotation", async (context) => {
  const init = gmsaPod("denied-init", { serviceAccount: "denied" });
  (init.spec as Record<string, unknown>).initContainers = [{ name: "setup", image: "busybox", securityContext: { windowsOptions: { gmsaCredentialSpecName: spec } } }];
  refusedBy(await create(context, init), "is not authorized to use");
  const annotated = gmsaPod("denied-annotation", { serviceAccount: "denied", annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": spec } });
  refusedBy(await create(context, annotated), "is not authorized to use");
});

Net("a dry run is left to the webhooks: it stores nothing, and the readiness check must see the function's answer", async (context) => {
  const reply = await kubeRequest(context.admin, "POST", `/api/v1/namespaces/${namespace}/pods?dryRun=All`, gmsaPod("dry-0", { serviceAccount: "denied", credSpec: spec }));
  assert.is(reply.status, 201, JSON.stringify(reply.body).slice(0, 400));
  assert.is((await kubeRequest(context.admin, "GET", `/api/v1/namespaces/${namespace}/pods/dry-0`)).status, 404, "nothing stored");
});

Net("no webhook: a pod whose service account may use the spec, contents inlined by hand, is admitted", async (context) => {
  const reply = await create(context, gmsaPod("allowed-0", { serviceAccount: "allowed", credSpec: spec, contents: '{"CmsPlugins":["ActiveDirectory"]}' }));
  assert.is(reply.status, 201, JSON.stringify(reply.body).slice(0, 400));
});

Net("no webhook: many places and names stay within the API server's cost budget: each distinct name is asked about once", async (context) => {
  const names = ["webapp1", "webapp2", "webapp3"];
  const many = gmsaPod("allowed-many", { serviceAccount: "allowed" });
  many.spec.containers = Array.from({ length: 30 }, (_, i) => ({
    name: `c${i}`,
    image: "mcr.microsoft.com/windows/servercore:ltsc2022",
    securityContext: { windowsOptions: { gmsaCredentialSpecName: names[i % names.length]! } },
  }));
  const admitted = await create(context, many);
  assert.is(admitted.status, 201, JSON.stringify(admitted.body).slice(0, 400));
  const flood = gmsaPod("denied-flood", { serviceAccount: "denied" });
  flood.spec.containers = Array.from({ length: 16 }, (_, i) => ({
    name: `c${i}`,
    image: "mcr.microsoft.com/windows/servercore:ltsc2022",
    securityContext: { windowsOptions: { gmsaCredentialSpecName: `made-up-${i}` } },
  }));
  const refused = await create(context, flood);
  assert.is(refused.status, 403, JSON.stringify(refused.body).slice(0, 400));
  refusedBy(
    refused,
    'is not authorized to use GMSACredentialSpec "made-up-0"; if the name is right, to grant it: npm run credspec -- grant made-up-0 --service-account apps/denied --apply',
  );
  const tooMany = gmsaPod("allowed-too-many", { serviceAccount: "allowed" });
  tooMany.spec.containers = Array.from({ length: 25 }, (_, i) => ({
    name: `c${i}`,
    image: "mcr.microsoft.com/windows/servercore:ltsc2022",
    securityContext: { windowsOptions: { gmsaCredentialSpecName: `spec-${i}` } },
  }));
  refusedBy(await create(context, tooMany), "names more than 24 distinct GMSA credential specs");
});

Net("no webhook: a pod without GMSA settings never meets the policy", async (context) => {
  const reply = await create(context, gmsaPod("plain-0", { serviceAccount: "denied" }));
  assert.is(reply.status, 201, JSON.stringify(reply.body).slice(0, 400));
});

Net("no webhook: contents without a name, and a name that is no object name, are refused", async (context) => {
  refusedBy(await create(context, gmsaPod("orphan-0", { serviceAccount: "allowed", contents: '{"CmsPlugins":["ActiveDirectory"]}' })), "without a credential spec name");
  refusedBy(
    await create(context, gmsaPod("orphan-annotation", { serviceAccount: "allowed", annotations: { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec": "{}" } })),
    "without a credential spec name",
  );
  // The API server checks the field's name itself; an annotation's value is the policy's to check.
  refusedBy(
    await create(context, gmsaPod("bad-name", { serviceAccount: "allowed", annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "Web_App1" } })),
    '"Web_App1" is not a valid GMSACredentialSpec name',
  );
});

Net("no webhook: GMSA settings of a running pod do not change, by annotation, status or binding", async (context) => {
  const path = `/api/v1/namespaces/${namespace}/pods/allowed-0`;
  const annotate = await kubeRequest(
    context.admin,
    "PATCH",
    path,
    { metadata: { annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "another" } } },
    "application/merge-patch+json",
  );
  refusedBy(annotate, "GMSA settings cannot be changed on an existing pod");
  const status = await kubeRequest(
    context.admin,
    "PATCH",
    `${path}/status`,
    { metadata: { annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "another" } } },
    "application/merge-patch+json",
  );
  refusedBy(status, "GMSA settings cannot be changed on an existing pod");
  const unscheduled = await create(context, gmsaPod("plain-1", { serviceAccount: "denied" }));
  assert.is(unscheduled.status, 201);
  const binding = await kubeRequest(context.admin, "POST", `/api/v1/namespaces/${namespace}/pods/plain-1/binding`, {
    apiVersion: "v1",
    kind: "Binding",
    metadata: { name: "plain-1", annotations: { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": spec } },
    target: { apiVersion: "v1", kind: "Node", name: "node-1" },
  });
  refusedBy(
    binding,
    'binding of pod "plain-1": GMSA settings cannot be changed on an existing pod (the binding would set the annotation pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name)',
  );
  const labelled = await kubeRequest(context.admin, "PATCH", path, { metadata: { labels: { tier: "web" } } }, "application/merge-patch+json");
  assert.is(labelled.status, 200, "other changes to a GMSA pod still go through");
});

Net("no webhook: an ephemeral container is checked as a new workload: its own name, contents without a name, or the pod's name it runs under", async (context) => {
  const path = `/api/v1/namespaces/${namespace}/pods/allowed-0`;
  const addEphemeral = async (container: Record<string, unknown>, podPath = path) => {
    const pod = (await kubeRequest(context.admin, "GET", podPath)).body as { spec: { ephemeralContainers?: unknown[] } };
    pod.spec.ephemeralContainers = [...(pod.spec.ephemeralContainers ?? []), container];
    return kubeRequest(context.admin, "PUT", `${podPath}/ephemeralcontainers`, pod);
  };
  refusedBy(
    await addEphemeral({ name: "debug-other", image: "busybox", securityContext: { windowsOptions: { gmsaCredentialSpecName: "another" } } }),
    'is not authorized to use GMSACredentialSpec "another"',
  );
  refusedBy(await addEphemeral({ name: "debug-orphan", image: "busybox", securityContext: { windowsOptions: { gmsaCredentialSpec: "{}" } } }), "without a credential spec name");
  const allowed = await addEphemeral({ name: "debug-allowed", image: "busybox", securityContext: { windowsOptions: { gmsaCredentialSpecName: "webapp2" } } });
  assert.is(allowed.status, 200, `an ephemeral container naming a spec its pod's service account may use: ${JSON.stringify(allowed.body).slice(0, 400)}`);

  // A pod-level name is what an ephemeral container naming none runs under: `use` of it is asked again.
  const inheriting = gmsaPod("inheriting-0", { serviceAccount: "revocable" });
  (inheriting.spec as Record<string, unknown>).securityContext = { windowsOptions: { gmsaCredentialSpecName: spec } };
  assert.is((await create(context, inheriting)).status, 201);
  await kubeRequest(context.admin, "DELETE", `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings/use-webapp1-revocable`);
  const deadline = Date.now() + 20_000;
  let reply: KubeReply;
  for (let i = 0; ; i++) {
    reply = await addEphemeral({ name: `debug-${i}`, image: "busybox" }, `/api/v1/namespaces/${namespace}/pods/inheriting-0`);
    if (reply.status >= 400 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  refusedBy(reply, `service account "revocable" in namespace "${namespace}" is not authorized to use GMSACredentialSpec "${spec}"`);
});

Net("no webhook: a pod stored with pod-level contents but no name takes no ephemeral container that names none of its own", async (context) => {
  // Such a pod predates every check: stored here with the pods' policy lifted for a moment.
  const bindingPath = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${safetyNetPolicyNames[0]}`;
  const binding = (await kubeRequest(context.admin, "GET", bindingPath)).body as KubernetesObject;
  await kubeRequest(context.admin, "DELETE", bindingPath);
  const legacy = gmsaPod("legacy-0", { serviceAccount: "allowed" });
  (legacy.spec as Record<string, unknown>).securityContext = { windowsOptions: { gmsaCredentialSpec: '{"CmsPlugins":["ActiveDirectory"]}' } };
  try {
    const deadline = Date.now() + 20_000;
    while ((await create(context, legacy)).status !== 201) {
      if (Date.now() > deadline) throw new Error("the legacy pod could not be stored with the policy lifted");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await applyObjects(context.admin, [{ ...binding, metadata: { name: binding.metadata.name, labels: binding.metadata.labels } } as KubernetesObject]);
  }
  const path = `/api/v1/namespaces/${namespace}/pods/legacy-0`;
  const deadline = Date.now() + 20_000;
  let reply: KubeReply;
  for (let i = 0; ; i++) {
    const pod = (await kubeRequest(context.admin, "GET", path)).body as { spec: { ephemeralContainers?: unknown[] } };
    pod.spec.ephemeralContainers = [...(pod.spec.ephemeralContainers ?? []), { name: `debug-${i}`, image: "busybox" }];
    reply = await kubeRequest(context.admin, "PUT", `${path}/ephemeralcontainers`, pod);
    if (reply.status >= 400 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  refusedBy(reply, "would run under the pod's GMSA credential spec contents, which name no credential spec");
});

Net("no webhook: names are counted once however many places give them; places beyond what the policy reads are refused", async (context) => {
  const many = gmsaPod("allowed-places", { serviceAccount: "allowed" });
  many.spec.containers = Array.from({ length: 40 }, (_, i) => ({
    name: `c${i}`,
    image: "mcr.microsoft.com/windows/servercore:ltsc2022",
    securityContext: { windowsOptions: { gmsaCredentialSpecName: i === 39 ? "webapp2" : spec } },
  }));
  const admitted = await create(context, many);
  assert.is(admitted.status, 201, `one name in 39 places and another in the 40th: ${JSON.stringify(admitted.body).slice(0, 400)}`);
  const tooMany = gmsaPod("allowed-too-many-places", { serviceAccount: "allowed" });
  tooMany.spec.containers = Array.from({ length: 65 }, (_, i) => ({
    name: `c${i}`,
    image: "mcr.microsoft.com/windows/servercore:ltsc2022",
    securityContext: { windowsOptions: { gmsaCredentialSpecName: spec } },
  }));
  refusedBy(await create(context, tooMany), "sets GMSA credential spec names in 65 places; the in-cluster policy reads at most 64");
});

Net("no webhook: the canary's namespace is no way around the policy when the canary is not installed", async (context) => {
  await applyObjects(context.admin, [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: canaryNamespace } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "intruder", namespace: canaryNamespace } },
  ] as KubernetesObject[]);
  const pod = { ...gmsaPod("canary-look-alike", { serviceAccount: "intruder", credSpec: spec }) };
  pod.metadata = { ...pod.metadata, namespace: canaryNamespace };
  const reply = await kubeRequest(context.admin, "POST", `/api/v1/namespaces/${canaryNamespace}/pods`, pod);
  refusedBy(reply, `service account "intruder" in namespace "${canaryNamespace}" is not authorized to use`);
});

Net("webhooks switched to Ignore and their function gone: the policy still refuses", async (context) => {
  const webhook = (kind: "Mutating" | "Validating") => ({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: `${kind}WebhookConfiguration`,
    metadata: { name: "gmsa-admission" },
    webhooks: [
      {
        name: `${kind.toLowerCase()}.gmsa.windows.k8s.io`,
        clientConfig: { url: "https://127.0.0.1:1/webhook" },
        rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
        failurePolicy: "Ignore",
        sideEffects: "None",
        admissionReviewVersions: ["v1"],
        timeoutSeconds: 2,
      },
    ],
  });
  await applyObjects(context.admin, [webhook("Mutating"), webhook("Validating")] as KubernetesObject[]);
  try {
    refusedBy(await create(context, gmsaPod("denied-ignore", { serviceAccount: "denied", credSpec: spec })), "is not authorized to use");
  } finally {
    for (const kind of ["mutating", "validating"]) {
      await kubeRequest(context.admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/${kind}webhookconfigurations/gmsa-admission`);
    }
  }
});

Net("no webhook, with the requesting-user check: the user who creates the pod, or adds a container to it, must hold use too", async (context) => {
  await applyObjects(context.admin, [
    ...(safetyNetObjects({ authorizeRequestingUser: true }) as KubernetesObject[]),
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "pod-maker", namespace },
      rules: [
        { apiGroups: [""], resources: ["pods"], verbs: ["create", "get"] },
        { apiGroups: [""], resources: ["pods/ephemeralcontainers"], verbs: ["update"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "pod-maker-alice", namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-maker" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "alice" }],
    },
  ] as KubernetesObject[]);
  const alice = new KubeConfig();
  alice.loadFromOptions({
    clusters: context.admin.clusters,
    contexts: context.admin.contexts,
    currentContext: context.admin.currentContext,
    users: context.admin.users.map((user) => ({ ...user, impersonateUser: "alice" })),
  });
  const deadline = Date.now() + 20_000;
  let reply: KubeReply;
  for (let i = 0; ; i++) {
    reply = await kubeRequest(alice, "POST", `/api/v1/namespaces/${namespace}/pods`, gmsaPod(`alice-${i}`, { serviceAccount: "allowed", credSpec: spec }));
    if (reply.status >= 400 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  refusedBy(reply, `user "alice" is not authorized to use GMSACredentialSpec "${spec}"`);

  const running = gmsaPod("pod-level-0", { serviceAccount: "allowed" });
  (running.spec as Record<string, unknown>).securityContext = { windowsOptions: { gmsaCredentialSpecName: spec } };
  assert.is((await create(context, running)).status, 201, "the admin may use every spec");
  const path = `/api/v1/namespaces/${namespace}/pods/pod-level-0`;
  const pod = (await kubeRequest(alice, "GET", path)).body as { spec: Record<string, unknown> };
  pod.spec.ephemeralContainers = [{ name: "debug", image: "busybox" }];
  refusedBy(await kubeRequest(alice, "PUT", `${path}/ephemeralcontainers`, pod), `user "alice" is not authorized to use GMSACredentialSpec "${spec}"`);
});

Net("without the policies the same requests go through: the refusals above were the policy's", async (context) => {
  for (const name of safetyNetPolicyNames) {
    await kubeRequest(context.admin, "DELETE", `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${name}`);
  }
  const deadline = Date.now() + 20_000;
  let reply: KubeReply;
  for (;;) {
    reply = await create(context, gmsaPod("denied-unchecked", { serviceAccount: "denied", credSpec: spec }));
    if (reply.status === 201 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.is(reply.status, 201, "with neither webhooks nor policy, nothing holds the use rule");
  assert.is((await create(context, gmsaPod("orphan-unchecked", { serviceAccount: "allowed", contents: "{}" }))).status, 201);
});

Net.run();
