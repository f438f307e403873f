import { suite } from "uvu";
import * as assert from "uvu/assert";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFixture } from "../support/fixtures.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { gmsa, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * GMSA_AUTHORIZE_REQUESTING_USER through a real kube-apiserver: the wiring grants the webhook's
 * own identity the SubjectAccessReviews this check asks, so real RBAC decides whether the user
 * who creates the pod may `use` the spec, and a user who may not is refused, not failed closed.
 */
const ns = "requesting-user";

const RequestingUser = suite<{ cluster: E2eCluster }>("the requesting user's `use` checked through kube-apiserver");

RequestingUser.before(async (context) => {
  try {
    context.cluster = await startE2eCluster({ webhookEnv: { GMSA_AUTHORIZE_REQUESTING_USER: "true" } });
    await context.cluster.apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      ...["web", "payroll"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: ns } })),
      // Both service accounts may use their spec; the developers may use webapp1's only.
      ...useGrant({ name: "sa-webapp1", namespace: ns, credSpecs: ["webapp1-credspec"], serviceAccount: "web" }),
      ...useGrant({ name: "sa-payroll", namespace: ns, credSpecs: ["payroll-gmsa"], serviceAccount: "payroll" }),
      ...useGrant({ name: "developers-webapp1", namespace: ns, credSpecs: ["webapp1-credspec"], group: "developers" }),
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "pod-creator", namespace: ns },
        rules: [
          { apiGroups: [""], resources: ["pods"], verbs: ["create"] },
          { apiGroups: [""], resources: ["pods/ephemeralcontainers"], verbs: ["patch", "update"] },
        ],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "pod-creator", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-creator" },
        subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
      },
    ]);
  } catch (error) {
    console.error("requesting-user set-up failed:", error);
    throw error;
  }
});

RequestingUser.after(async (context) => {
  await context.cluster?.close();
});

function windowsPod(name: string, serviceAccountName: string, credSpec: string): PodSpec {
  return {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { name, namespace: ns },
    spec: { serviceAccountName, securityContext: gmsa(credSpec), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
}

RequestingUser("a user who may use the spec creates a pod whose service account may too: admitted and expanded", async ({ cluster }) => {
  const reply = await kubeRequest(cluster.developer, "POST", `/api/v1/namespaces/${ns}/pods`, windowsPod("allowed", "web", "webapp1-credspec"));
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(reply.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, canonicalJson(credSpecFixture("webapp1-credspec").credspec));
});

RequestingUser("a user who may not use the spec is refused with 403 although the service account may", async ({ cluster }) => {
  const reply = await kubeRequest(cluster.developer, "POST", `/api/v1/namespaces/${ns}/pods`, windowsPod("refused", "payroll", "payroll-gmsa"));
  assert.is(reply.status, 403, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "(mutate|validate)\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.match(reply.body.message, /alice/);
  assert.match(reply.body.message, /is not authorized to use GMSACredentialSpec "payroll-gmsa"/);
});

/** Alice adds an ephemeral container that names no credential spec to a pod someone else created. */
async function addDebugContainer(cluster: E2eCluster, pod: string) {
  return kubeRequest(
    cluster.developer,
    "PATCH",
    `/api/v1/namespaces/${ns}/pods/${pod}/ephemeralcontainers`,
    { spec: { ephemeralContainers: [{ name: "debug", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] } },
    "application/strategic-merge-patch+json",
  );
}

RequestingUser("an ephemeral container without a spec of its own runs under the pod's: a user who may not use it cannot add one", async ({ cluster }) => {
  const created = await kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods`, windowsPod("payroll-debug", "payroll", "payroll-gmsa"));
  assert.is(created.status, 201, JSON.stringify(created.body));
  const reply = await addDebugContainer(cluster, "payroll-debug");
  assert.is(reply.status, 403, JSON.stringify(reply.body).slice(0, 500));
  assert.match(
    reply.body.message,
    /ephemeral container "debug" of pod "payroll-debug" \(inheriting the pod's credential spec\): user "alice" is not authorized to use GMSACredentialSpec "payroll-gmsa"/,
  );
  const after = await kubeRequest(cluster.admin, "GET", `/api/v1/namespaces/${ns}/pods/payroll-debug`);
  assert.is(after.body.spec.ephemeralContainers, undefined);
});

RequestingUser("a user who may use the pod's spec adds an ephemeral container that runs under it", async ({ cluster }) => {
  const created = await kubeRequest(cluster.admin, "POST", `/api/v1/namespaces/${ns}/pods`, windowsPod("web-debug", "web", "webapp1-credspec"));
  assert.is(created.status, 201, JSON.stringify(created.body));
  const reply = await addDebugContainer(cluster, "web-debug");
  assert.is(reply.status, 200, JSON.stringify(reply.body).slice(0, 500));
  assert.is(reply.body.spec.ephemeralContainers[0].name, "debug");
});

RequestingUser.run();
