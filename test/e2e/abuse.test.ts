import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { servedFor } from "../support/apiServerMetrics.js";
import { credSpecFixture } from "../support/fixtures.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { gmsa, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * A user who may only create pods tries to stall the webhook with one pod that names thousands
 * of credential specs, through a real kube-apiserver. The pod is refused at once, before any
 * API call, and a legitimate GMSA pod created meanwhile is admitted as if nothing happened.
 */
const webapp = canonicalJson(credSpecFixture("webapp1-credspec").credspec);
const ns = "abuse";
const otherTeam = "abuse-other-team";
const budgetMs = 4000;

const Abuse = suite<{ cluster: E2eCluster }>("abuse through kube-apiserver");

Abuse.before(async (context) => {
  try {
    context.cluster = await startE2eCluster({ webhookEnv: { GMSA_ADMISSION_BUDGET_MS: String(budgetMs) } });
    await context.cluster.apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "web", namespace: ns } },
      // Another team, whose service account is asked about for the first time during a flood.
      { apiVersion: "v1", kind: "Namespace", metadata: { name: otherTeam } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "reports", namespace: otherTeam } },
      ...useGrant({ name: "use-webapp1", namespace: otherTeam, credSpecs: ["webapp1-credspec"], serviceAccount: "reports" }),
      ...useGrant({ name: "use-webapp1", namespace: ns, credSpecs: ["webapp1-credspec"], serviceAccount: "web" }),
      // Alice may create pods here and nothing else: no use of any credential spec.
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "pod-creator", namespace: ns },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["create"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "alice-creates-pods", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-creator" },
        subjects: [{ kind: "User", name: "alice", apiGroup: "rbac.authorization.k8s.io" }],
      },
    ]);
  } catch (error) {
    console.error("abuse test set-up failed:", error);
    throw error;
  }
});

Abuse.after(async (context) => {
  await context.cluster?.close();
});

let counter = 0;
function windowsPod(edit: (p: PodSpec) => void = () => {}): PodSpec {
  const p: PodSpec = {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { name: `pod-${++counter}`, namespace: ns },
    spec: { serviceAccountName: "web", containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
  edit(p);
  return p;
}

/**
 * 3 000 alpha annotation names for containers the pod does not have. Short names keep the
 * annotations (about 220 KB) under the API server's 256 KiB limit for all of a pod's annotations.
 */
function podNaming3000Specs(): PodSpec {
  return windowsPod((p) => {
    p.metadata.annotations = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`c${i}.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name`, `s${i}`]));
  });
}

async function timed(work: Promise<KubeReply>): Promise<KubeReply & { ms: number }> {
  const started = performance.now();
  const reply = await work;
  return { ...reply, ms: performance.now() - started };
}

const createAsAlice = (cluster: E2eCluster, p: PodSpec) => kubeRequest(cluster.developer, "POST", `/api/v1/namespaces/${ns}/pods`, p);

Abuse("the pod is within the API server's own limits: it reaches the webhook", async ({ cluster }) => {
  const annotations = podNaming3000Specs().metadata.annotations!;
  const size = Object.entries(annotations).reduce((sum, [k, v]) => sum + k.length + v.length, 0);
  assert.ok(size < 256 * 1024, `annotations of ${size} bytes`);
  cluster.webhook.logs.length = 0;
  const reply = await createAsAlice(cluster, podNaming3000Specs());
  assert.is(reply.status, 422, JSON.stringify(reply.body).slice(0, 500));
  assert.match(reply.body.message, /admission webhook "mutate\.gmsa-admission\.windows\.k8s\.io" denied the request/);
});

Abuse("a pod naming 3 000 specs costs the API server no access review and no read", async ({ cluster }) => {
  const reviewsBefore = await servedFor(cluster, "localsubjectaccessreviews");
  const readsBefore = await servedFor(cluster, "gmsacredentialspecs");
  const reply = await createAsAlice(cluster, podNaming3000Specs());
  assert.is(reply.status, 422);
  assert.is(await servedFor(cluster, "localsubjectaccessreviews"), reviewsBefore);
  assert.is(await servedFor(cluster, "gmsacredentialspecs"), readsBefore);
});

Abuse("while a pod naming 3 000 specs is refused, a legitimate GMSA pod is admitted at once", async ({ cluster }) => {
  // Warm the connection and the caches as a running cluster has them.
  assert.is(
    (
      await createAsAlice(
        cluster,
        windowsPod((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
      )
    ).status,
    201,
  );

  const big = timed(createAsAlice(cluster, podNaming3000Specs()));
  await new Promise((r) => setTimeout(r, 20));
  const legitimate = timed(
    createAsAlice(
      cluster,
      windowsPod((p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec"))),
    ),
  );
  const [refused, admitted] = await Promise.all([big, legitimate]);

  assert.is(admitted.status, 201, JSON.stringify(admitted.body).slice(0, 500));
  assert.is(admitted.body.spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpec, webapp);
  assert.ok(admitted.ms < 1000, `the legitimate pod took ${admitted.ms.toFixed(0)} ms`);

  assert.is(refused.status, 422, JSON.stringify(refused.body).slice(0, 500));
  assert.match(refused.body.message, /annotation c\d+\.container\.alpha\.windows\.kubernetes\.io\/gmsa-credential-spec-name names container "c\d+", which the pod does not have/);
  assert.ok(refused.ms < budgetMs, `the big pod was refused after ${refused.ms.toFixed(0)} ms`);
  console.log(`  legitimate pod admitted in ${admitted.ms.toFixed(0)} ms; 3 000-name pod refused in ${refused.ms.toFixed(0)} ms`);
});

Abuse("a dozen pods of 2 000 containers naming one usable spec are refused before any patch, while another pod is admitted within its budget", async ({ cluster }) => {
  assert.is(
    (
      await createAsAlice(
        cluster,
        windowsPod((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
      )
    ).status,
    201,
  );
  // Each would have been a patch of 2 000 copies of the spec; the pod itself is about 200 KB.
  const wide = () =>
    windowsPod((p) => {
      p.spec.containers = Array.from({ length: 2000 }, (_, i) => ({
        name: `c${i}`,
        image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
        securityContext: gmsa("webapp1-credspec"),
      }));
    });
  const floods = Array.from({ length: 12 }, () => timed(createAsAlice(cluster, wide())));
  await new Promise((r) => setTimeout(r, 20));
  const legitimate = await timed(
    createAsAlice(
      cluster,
      windowsPod((p) => (p.spec.containers[0]!.securityContext = gmsa("webapp1-credspec"))),
    ),
  );
  const refused = await Promise.all(floods);
  assert.is(legitimate.status, 201, JSON.stringify(legitimate.body).slice(0, 500));
  assert.ok(legitimate.ms < budgetMs, `the other pod took ${legitimate.ms.toFixed(0)} ms`);
  for (const reply of refused) {
    assert.is(reply.status, 422, JSON.stringify(reply.body).slice(0, 300));
    assert.match(reply.body.message, /sets GMSA credential specs in 2000 places .*at most 64 are allowed in one pod/);
  }
  console.log(
    `  other pod admitted in ${legitimate.ms.toFixed(0)} ms while 12 pods of 2 000 places were refused, the slowest in ${Math.max(...refused.map((r) => r.ms)).toFixed(0)} ms`,
  );
});

Abuse("more distinct names than the cap, on containers the pod has, are refused before any lookup", async ({ cluster }) => {
  const p = windowsPod((p) => {
    p.spec.containers = Array.from({ length: 17 }, (_, i) => ({ name: `c${i}`, image: "x", securityContext: gmsa(`spec-${i}`) }));
  });
  const reviewsBefore = await servedFor(cluster, "localsubjectaccessreviews");
  const reply = await createAsAlice(cluster, p);
  assert.is(reply.status, 422, JSON.stringify(reply.body).slice(0, 500));
  assert.match(reply.body.message, /names 17 distinct GMSA credential specs; at most 16 are allowed in one pod/);
  assert.is(await servedFor(cluster, "localsubjectaccessreviews"), reviewsBefore);
});

/** A pod of alice's naming the most distinct credential specs one pod may: all made up. */
function podNamingMadeUpSpecs(i: number, count = 16): PodSpec {
  return windowsPod((p) => {
    p.spec.containers = Array.from({ length: count }, (_, c) => ({ name: `c${c}`, image: "x", securityContext: gmsa(`made-up-${i}-${c}`) }));
  });
}

Abuse("a flood of pods naming 16 made-up specs each costs about one review a pod and leaves another team's admission fast", async ({ cluster }) => {
  const flood = 150;
  const reviewsBefore = await servedFor(cluster, "localsubjectaccessreviews");
  const floodReplies = Array.from({ length: flood }, (_, i) => timed(createAsAlice(cluster, podNamingMadeUpSpecs(i))));
  await new Promise((r) => setTimeout(r, 200));
  // A service account asked about for the first time: its answer cannot come from the cache.
  const legitimate = await timed(
    kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${otherTeam}/pods`, {
      ...windowsPod((p) => (p.spec.securityContext = gmsa("webapp1-credspec"))),
      metadata: { name: "reports-0", namespace: otherTeam },
      spec: { serviceAccountName: "reports", securityContext: gmsa("webapp1-credspec"), containers: [{ name: "app", image: "x" }] },
    }),
  );
  const refused = await Promise.all(floodReplies);
  const reviews = (await servedFor(cluster, "localsubjectaccessreviews")) - reviewsBefore;
  const slowest = Math.max(...refused.map((r) => r.ms));
  console.log(
    `  ${flood} pods × 16 made-up names: ${reviews} access reviews, slowest refusal ${slowest.toFixed(0)} ms; other team's pod ${legitimate.status} in ${legitimate.ms.toFixed(0)} ms`,
  );

  assert.is(legitimate.status, 201, JSON.stringify(legitimate.body).slice(0, 500));
  assert.is(legitimate.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, webapp);
  assert.ok(legitimate.ms < budgetMs / 2, `the other team's pod took ${legitimate.ms.toFixed(0)} ms`);
  // Every flood pod is refused: 403 once its first name is judged, or, past the admissions one
  // namespace may have waiting on the API server, 503 at once without waiting (the flood's own
  // excess is shed; the other team's admission above is not).
  let shed = 0;
  for (const reply of refused) {
    if (reply.status === 503) {
      shed++;
      assert.match(reply.body.message, /too many admissions are already waiting for the Kubernetes API server/);
      continue;
    }
    assert.is(reply.status, 403, JSON.stringify(reply.body).slice(0, 500));
    assert.match(reply.body.message, /service account "web" in namespace "abuse" is not authorized to use GMSACredentialSpec "made-up-\d+-0"/);
  }
  console.log(`  of them ${shed} shed at once (503), ${flood - shed} refused for want of use (403)`);
  assert.ok(flood - shed > 0, "some flood pods were judged");
  // One review per pod for its first name (validation may ask again when the answer is not
  // cached), a few for the other team: far from the 16 a pod that every name used to cost.
  assert.ok(reviews <= flood * 2 + 10, `${reviews} access reviews for ${flood} pods`);
});

/**
 * The handler's side of pods/binding, through the API server's own requests. The product's
 * webhook configuration routes bindings in its own right; here a configuration of the test's
 * sends every binding to /validate, so the test does not depend on that routing.
 */
Abuse("a binding that would copy GMSA annotations onto a pod is refused; other bindings pass", async ({ cluster }) => {
  await cluster.apply([
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "test-bindings-to-validate" },
      webhooks: [
        {
          name: "bindings.test.gmsa-admission.windows.k8s.io",
          clientConfig: { url: `${cluster.webhook.server.url}/validate`, caBundle: Buffer.from(cluster.webhook.caPem).toString("base64") },
          admissionReviewVersions: ["v1"],
          sideEffects: "None",
          failurePolicy: "Fail",
          timeoutSeconds: 5,
          rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods/binding", "bindings"], scope: "Namespaced" }],
        },
      ],
    },
  ]);
  // No scheduler binds these: the test does.
  const unscheduled = () => windowsPod((p) => Object.assign(p.spec, { schedulerName: "nobody" }));
  const binding = (pod: string, annotations?: Record<string, string>) => ({
    apiVersion: "v1",
    kind: "Binding",
    metadata: { name: pod, namespace: ns, ...(annotations ? { annotations } : {}) },
    target: { apiVersion: "v1", kind: "Node", name: "node-1" },
  });
  const gmsaAnnotation = { "pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name": "webapp1-credspec" };

  for (const path of [(pod: string) => `/api/v1/namespaces/${ns}/pods/${pod}/binding`, () => `/api/v1/namespaces/${ns}/bindings`]) {
    const victim = unscheduled();
    assert.is((await kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods`, victim)).status, 201);
    const refused = await kubeRequest(cluster.admin, "POST", path(victim.metadata.name!), binding(victim.metadata.name!, { ...gmsaAnnotation, team: "web" }));
    assert.is(refused.status, 403, JSON.stringify(refused.body).slice(0, 500));
    assert.match(
      refused.body.message,
      /binding of pod "pod-\d+": GMSA settings cannot be changed on an existing pod \(the binding would set the annotation pod\.alpha\.windows\.kubernetes\.io\/gmsa-credential-spec-name\)/,
    );
    const after = await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods/${victim.metadata.name}`);
    assert.is(after.body.metadata.annotations?.["pod.alpha.windows.kubernetes.io/gmsa-credential-spec-name"], undefined);
    assert.is(after.body.spec.nodeName, undefined);

    const plain = await kubeRequest(cluster.admin, "POST", path(victim.metadata.name!), binding(victim.metadata.name!, { team: "web" }));
    assert.is(plain.status, 201, JSON.stringify(plain.body).slice(0, 500));
    assert.is((await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods/${victim.metadata.name}`)).body.spec.nodeName, "node-1");
  }
});

Abuse.run();
