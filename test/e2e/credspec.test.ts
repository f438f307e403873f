import { suite } from "uvu";
import * as assert from "uvu/assert";
import { kubeRequest } from "../support/kubeRequest.js";
import { startE2eCluster, type E2eCluster } from "../support/e2eCluster.js";
import { credSpecFile } from "../lib/credspec/credSpecFixtures.js";
import { runCredspec } from "../../cluster/credspecCommand.js";
import { isConflict, withKubeObjects } from "../../cluster/kubeObjects.js";
import { gmsa } from "../support/reviews.js";

/**
 * Credential specs through a real kube-apiserver: it sends every create and update of a
 * GMSACredentialSpec to the credential spec webhook, returns its refusal to the client and
 * passes its warnings on as Warning headers, which kubectl prints.
 */
const E2e = suite<{ cluster: E2eCluster }>("credential specs end to end");

E2e.before(async (context) => {
  try {
    context.cluster = await startE2eCluster();
  } catch (error) {
    console.error("end-to-end set-up failed:", error);
    throw error;
  }
});

E2e.after(async (context) => {
  await context.cluster?.close();
});

/**
 * The warnings as a client prints them: the API server may fold several into one Warning header
 * (`299 - "a", 299 - "b"`) and escapes the quotes inside each.
 */
function shownWarnings(warnings: readonly string[]): string[] {
  return warnings.flatMap((w) => w.split(/", 299 - "/)).map((w) => w.replace(/^299 - "|"$/g, "").replace(/\\"/g, '"'));
}

const collection = (version = "v1") => `/apis/windows.k8s.io/${version}/gmsacredentialspecs`;

E2e("a broken credential spec is refused at create, the field and the fault named", async ({ cluster }) => {
  const object = credSpecFile("domain-joined.yaml");
  object.metadata.name = "broken-sid";
  object.credspec.DomainJoinConfig.Sid = "S-1-5-21-2126729477";
  const reply = await kubeRequest(cluster.admin, "POST", collection(), object);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /admission webhook "credspec\.gmsa-admission\.windows\.k8s\.io" denied the request/);
  assert.match(reply.body.message, /GMSACredentialSpec "broken-sid" is not a valid Windows credential spec: credspec\.DomainJoinConfig\.Sid: must be a domain SID/);
  const lookup = await kubeRequest(cluster.admin, "GET", `${collection()}/broken-sid`);
  assert.is(lookup.status, 404);
});

E2e("the v1alpha1 form is refused the same way", async ({ cluster }) => {
  const object = { ...credSpecFile("aks-keyvault.yaml"), apiVersion: "windows.k8s.io/v1alpha1" };
  object.metadata.name = "old-form";
  object.credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts = [];
  const reply = await kubeRequest(cluster.admin, "POST", collection("v1alpha1"), object);
  assert.is(reply.status, 422, JSON.stringify(reply.body));
  assert.match(reply.body.message, /credspec\.ActiveDirectoryConfig\.GroupManagedServiceAccounts: must be a non-empty list/);
});

E2e("a suspicious credential spec is created, and the client is shown each warning", async ({ cluster }) => {
  const object = credSpecFile("domain-joined.yaml");
  object.metadata.name = "one-scope";
  object.credspec.ActiveDirectoryConfig.GroupManagedServiceAccounts.pop();
  object.credspec.DomainJoinConfig.NetBiosName = "contoso";
  const reply = await kubeRequest(cluster.admin, "POST", collection(), object);
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  const warnings = shownWarnings(reply.warnings);
  assert.is(warnings.length, 2, JSON.stringify(warnings));
  assert.match(warnings[0]!, /^GMSACredentialSpec "one-scope": credspec\.ActiveDirectoryConfig\.GroupManagedServiceAccounts: no entry has DomainJoinConfig\.NetBiosName/);
  assert.match(warnings[1]!, /^GMSACredentialSpec "one-scope": credspec\.DomainJoinConfig\.NetBiosName: is not upper case/);
});

E2e("a change that breaks an existing credential spec is refused; a label on a broken old one is not", async ({ cluster }) => {
  const broken = await kubeRequest(
    cluster.admin,
    "PATCH",
    `${collection()}/webapp1-credspec`,
    { credspec: { DomainJoinConfig: { Guid: "{244818ae-87ca-4fcd-92ec-e79e5252348a}" } } },
    "application/merge-patch+json",
  );
  assert.is(broken.status, 422, JSON.stringify(broken.body));
  assert.match(broken.body.message, /credspec\.DomainJoinConfig\.Guid: must be a GUID without braces/);
  const labelled = await kubeRequest(cluster.admin, "PATCH", `${collection()}/empty-credspec`, { metadata: { labels: { team: "payroll" } } }, "application/merge-patch+json");
  assert.is(labelled.status, 200, JSON.stringify(labelled.body));
});

async function credspecCommand(cluster: E2eCluster, args: string[], files: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await runCredspec(args, {
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
    readFile: (path) => {
      const file = files[path];
      if (file === undefined) throw new Error(`no file ${path} in this test`);
      return Buffer.from(file);
    },
    kubeConfig: () => cluster.admin,
  });
  return { code, stdout, stderr };
}

E2e("from generate to a running pod: the spec applied, the pod refused with the grant to run, the grant applied, the pod admitted", async ({ cluster }) => {
  await cluster.apply([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "orders", namespace: "shop" } },
  ]);
  const generated = await credspecCommand(cluster, [
    "generate",
    ...["--dns-name", "shop.example.org", "--netbios-name", "SHOP", "--dns-tree-name", "example.org"],
    ...["--sid", "S-1-5-21-3623811015-3361044348-30300820", "--guid", "9d1c8e4a-3b2f-4c6d-8e7f-112233445566", "--account", "OrdersApp"],
    ...["--plugin", "akv", "--secret-uri", "https://kv-shop.vault.azure.net/secrets/gmsa", "--object-id", "0b6f3c1e-1111-4222-8333-444455556666", "--apply"],
  ]);
  assert.is(generated.code, 0, generated.stderr);
  assert.match(generated.stdout, /applied GMSACredentialSpec ordersapp/);

  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "orders-0", namespace: "shop" },
    spec: { serviceAccountName: "orders", securityContext: gmsa("ordersapp"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
  const refused = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/shop/pods", pod);
  assert.is(refused.status, 403, JSON.stringify(refused.body));
  const advice = /to grant it: (npm run credspec -- grant \S+ --service-account \S+ --apply) \(a Role /.exec(refused.body.message);
  assert.ok(advice, refused.body.message);
  assert.is(advice[1], "npm run credspec -- grant ordersapp --service-account shop/orders --apply");

  const granted = await credspecCommand(cluster, ["grant", "ordersapp", "--service-account", "shop/orders", "--apply"]);
  assert.is(granted.code, 0, granted.stderr);
  // A refusal is remembered briefly (a fifth of the authorization cache's TTL): retry as a user
  // would, first as dry runs. The one that expires between mutate and validate can let a pod
  // through without its contents (mutate met the refusal, validate asked afresh): a known race,
  // not what this test is about; once a dry run is inlined, the answer is remembered.
  const inlined = (reply: { status: number; body: { spec?: { securityContext?: { windowsOptions?: { gmsaCredentialSpec?: string } } } } }) =>
    reply.status === 201 && typeof reply.body.spec?.securityContext?.windowsOptions?.gmsaCredentialSpec === "string";
  let tried = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/shop/pods?dryRun=All", pod);
  for (const started = Date.now(); !inlined(tried) && Date.now() - started < 10_000;) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    tried = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/shop/pods?dryRun=All", pod);
  }
  const admitted = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/shop/pods", pod);
  assert.is(admitted.status, 201, JSON.stringify(admitted.body));
  assert.match(admitted.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, /"PluginGUID":"\{CCC2A336-D7F3-4818-A213-272B7924213E\}"/);
});

E2e("explain tells what the webhooks would decide for a pod, creating nothing", async ({ cluster }) => {
  await cluster.apply([{ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "idle", namespace: "shop" } }]);
  const manifest = (account: string) =>
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "explained", namespace: "shop" },
      spec: { serviceAccountName: account, securityContext: gmsa("ordersapp"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
    });
  const refused = await credspecCommand(cluster, ["explain", "idle.yaml"], { "idle.yaml": manifest("idle") });
  assert.is(refused.code, 1, refused.stdout + refused.stderr);
  assert.match(refused.stdout, /validate: denied \(403\): pod "explained": service account "idle" in namespace "shop" is not authorized to use GMSACredentialSpec "ordersapp"/);
  const admitted = await credspecCommand(cluster, ["explain", "orders.yaml"], { "orders.yaml": manifest("orders") });
  assert.is(admitted.code, 0, admitted.stdout + admitted.stderr);
  assert.match(admitted.stdout, /mutate: allowed, would add the contents at \/spec\/securityContext\/windowsOptions\/gmsaCredentialSpec/);
  assert.not.match(admitted.stdout, /OrdersApp|vault\.azure\.net/);
  const lookup = await kubeRequest(cluster.admin, "GET", "/api/v1/namespaces/shop/pods/explained");
  assert.is(lookup.status, 404);
});

E2e("explain takes every workload kind's pod template, with the namespace and service account its pods run as, and hints at a similar name", async ({ cluster }) => {
  const podSpec = (name: string) => ({
    serviceAccountName: "orders",
    securityContext: gmsa(name),
    containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }],
  });
  const template = (name: string) => ({ metadata: { labels: { app: "orders" } }, spec: podSpec(name) });
  const selector = { matchLabels: { app: "orders" } };
  const workloads: Record<string, unknown> = {
    Deployment: { apiVersion: "apps/v1", spec: { selector, template: template("ordersapp") } },
    StatefulSet: { apiVersion: "apps/v1", spec: { selector, serviceName: "orders", template: template("ordersapp") } },
    DaemonSet: { apiVersion: "apps/v1", spec: { selector, template: template("ordersapp") } },
    ReplicaSet: { apiVersion: "apps/v1", spec: { selector, template: template("ordersapp") } },
    Job: { apiVersion: "batch/v1", spec: { template: { ...template("ordersapp"), spec: { ...podSpec("ordersapp"), restartPolicy: "Never" } } } },
    CronJob: {
      apiVersion: "batch/v1",
      spec: { schedule: "0 * * * *", jobTemplate: { spec: { template: { ...template("ordersapp"), spec: { ...podSpec("ordersapp"), restartPolicy: "Never" } } } } },
    },
  };
  for (const [kind, body] of Object.entries(workloads)) {
    const manifest = JSON.stringify({ kind, metadata: { name: "orders", namespace: "shop" }, ...(body as object) });
    const explained = await credspecCommand(cluster, ["explain", "workload.yaml"], { "workload.yaml": manifest });
    assert.is(explained.code, 0, `${kind}: ${explained.stdout}${explained.stderr}`);
    assert.match(explained.stdout, new RegExp(`^${kind} "orders": its pods run in namespace "shop" as service account "orders"$`, "m"));
    assert.match(explained.stdout, /mutate: allowed, would add the contents at \/spec\/securityContext\/windowsOptions\/gmsaCredentialSpec/);
  }
  // A typo: explain names the similar specs the service account may use (the webhook does not).
  const typo = JSON.stringify({ kind: "Deployment", metadata: { name: "orders", namespace: "shop" }, apiVersion: "apps/v1", spec: { selector, template: template("orderssapp") } });
  const refused = await credspecCommand(cluster, ["explain", "typo.yaml"], { "typo.yaml": typo });
  assert.is(refused.code, 1, refused.stdout);
  assert.match(refused.stdout, /existing credential specs with similar names that service account "orders" in namespace "shop" may use: "ordersapp"/, refused.stdout);
  const notAWorkload = await credspecCommand(cluster, ["explain", "svc.yaml"], { "svc.yaml": JSON.stringify({ apiVersion: "v1", kind: "Service", metadata: { name: "x" } }) });
  assert.is(notAWorkload.code, 1);
  assert.match(notAWorkload.stdout, /a Service has no pods to explain/);
});

E2e("who-can-use lists, from RBAC, the service accounts that access reviews allow, through a Role, a wildcard ClusterRole and an aggregated one", async ({ cluster }) => {
  const aggregateLabel = { "gmsa-admission.test/aggregate-to-use": "true" };
  const accounts = [
    ["team-a", "direct"],
    ["team-a", "other-spec"],
    ["team-b", "wildcard"],
    ["team-c", "aggregated"],
    ["team-c", "nobody"],
  ] as const;
  await cluster.apply([
    ...["team-a", "team-b", "team-c"].map((name) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } })),
    ...accounts.map(([namespace, name]) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } })),
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "use-webapp1", namespace: "team-a" },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: ["webapp1-credspec"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "use-payroll", namespace: "team-a" },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: ["payroll-gmsa"] }],
    },
    binding("team-a", "direct", "Role", "use-webapp1"),
    binding("team-a", "other-spec", "Role", "use-payroll"),
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "e2e-every-gmsa" }, rules: [{ apiGroups: ["*"], resources: ["*"], verbs: ["use"] }] },
    binding("team-b", "wildcard", "ClusterRole", "e2e-every-gmsa"),
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "e2e-gmsa-aggregate" },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: aggregateLabel }] },
      rules: [],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "e2e-gmsa-part", labels: aggregateLabel },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: ["webapp1-credspec"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "e2e-aggregated" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "e2e-gmsa-aggregate" },
      subjects: [{ kind: "ServiceAccount", name: "aggregated", namespace: "team-c" }],
    },
  ]);
  // The controller manager fills in the aggregated role's rules shortly after.
  let listed = await credspecCommand(cluster, ["who-can-use", "webapp1-credspec"]);
  for (const started = Date.now(); !listed.stdout.includes("team-c/aggregated") && Date.now() - started < 10_000;) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    listed = await credspecCommand(cluster, ["who-can-use", "webapp1-credspec"]);
  }
  assert.is(listed.code, 0, listed.stderr);
  for (const [namespace, name] of accounts) {
    const review = await kubeRequest(cluster.admin, "POST", `/apis/authorization.k8s.io/v1/namespaces/${namespace}/localsubjectaccessreviews`, {
      apiVersion: "authorization.k8s.io/v1",
      kind: "LocalSubjectAccessReview",
      spec: {
        user: `system:serviceaccount:${namespace}:${name}`,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
        resourceAttributes: { namespace, verb: "use", group: "windows.k8s.io", resource: "gmsacredentialspecs", name: "webapp1-credspec" },
      },
    });
    const allowed = review.body.status.allowed === true;
    const line = listed.stdout.split("\n").find((l) => l.startsWith("ServiceAccount") && l.includes(` ${namespace}/${name} `));
    assert.is(line !== undefined, allowed, `${namespace}/${name}: access review says ${allowed}; who-can-use printed:\n${listed.stdout}`);
    if (line) assert.match(line, / allowed /);
  }
  assert.match(listed.stdout, /ClusterRoleBinding e2e-aggregated -> ClusterRole e2e-gmsa-aggregate/);
  assert.match(listed.stdout, /RoleBinding team-b\/e2e-wildcard -> ClusterRole e2e-every-gmsa/);
});

E2e("a missing name's 422 names no other spec, and an account without use gets the 403 first", async ({ cluster }) => {
  const pod = (namespace: string, account: string) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `typo-${account}`, namespace },
    spec: { serviceAccountName: account, securityContext: gmsa("webapp1-credspex"), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  });
  // team-b/wildcard may use every credential spec (the wildcard ClusterRole above). Finding the
  // similar names it may use would cost access reviews for the names near its guess, whether it may
  // use them or not: their cost would tell a caller that holds `use` of a name since renamed which
  // specs exist near it. `credspec explain` names them (above).
  const missing = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/team-b/pods", pod("team-b", "wildcard"));
  assert.is(missing.status, 422, JSON.stringify(missing.body));
  assert.match(missing.body.message, /GMSACredentialSpec "webapp1-credspex" does not exist$/);
  // team-a/direct may use webapp1-credspec only: the mistyped name is refused before existence is
  // judged, and the advice holds either way (grant it if the name is right). The webhook names no
  // similar spec after a 403: finding them costs access reviews a refused caller could multiply.
  const refused = await kubeRequest(cluster.admin, "POST", "/api/v1/namespaces/team-a/pods", pod("team-a", "direct"));
  assert.is(refused.status, 403, JSON.stringify(refused.body));
  assert.not.match(refused.body.message, /does not exist|similar/);
  assert.match(refused.body.message, /; if the name is right, to grant it: npm run credspec -- grant webapp1-credspex /);
});

E2e("revoke removes exactly what grant made: a binding changed by hand, and a role another binding still uses, are kept", async ({ cluster }) => {
  await cluster.apply([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "revoking" } },
    ...["one", "two"].map((name) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "revoking" } })),
  ]);
  const rbac = (kind: string, name: string, namespace?: string) => `/apis/rbac.authorization.k8s.io/v1${namespace ? `/namespaces/${namespace}` : ""}/${kind}/${name}`;
  // A typo granted and revoked: both objects go, and the account is back where it was.
  assert.is((await credspecCommand(cluster, ["grant", "ordersap", "--service-account", "revoking/one", "--apply"])).code, 0);
  const dry = await credspecCommand(cluster, ["revoke", "ordersap", "--service-account", "revoking/one"]);
  assert.match(dry.stdout, /would delete RoleBinding revoking\/gmsa-use-ordersap-one\nwould delete Role revoking\/gmsa-use-ordersap\nnothing was changed/);
  assert.is((await kubeRequest(cluster.admin, "GET", rbac("roles", "gmsa-use-ordersap", "revoking"))).status, 200, "a revoke without --apply changed nothing");
  const revoked = await credspecCommand(cluster, ["revoke", "ordersap", "--service-account", "revoking/one", "--apply"]);
  assert.is(revoked.code, 0, revoked.stderr);
  assert.equal(revoked.stdout.trim().split("\n"), ["deleted RoleBinding revoking/gmsa-use-ordersap-one", "deleted Role revoking/gmsa-use-ordersap"]);
  assert.is((await kubeRequest(cluster.admin, "GET", rbac("rolebindings", "gmsa-use-ordersap-one", "revoking"))).status, 404);
  assert.is((await kubeRequest(cluster.admin, "GET", rbac("roles", "gmsa-use-ordersap", "revoking"))).status, 404);

  // A cluster-wide grant to two accounts: revoking one keeps the ClusterRole the other's binding uses.
  for (const account of ["one", "two"]) {
    assert.is((await credspecCommand(cluster, ["grant", "ordersapp", "--service-account", `revoking/${account}`, "--cluster-wide", "--apply"])).code, 0);
  }
  const first = await credspecCommand(cluster, ["revoke", "ordersapp", "--service-account", "revoking/one", "--cluster-wide", "--apply"]);
  assert.equal(first.stdout.trim().split("\n"), [
    "deleted RoleBinding revoking/gmsa-use-ordersapp-one",
    "kept ClusterRole gmsa-use-ordersapp: still bound by RoleBinding revoking/gmsa-use-ordersapp-two",
  ]);
  // The other binding changed by hand (a second subject): it is no longer grant's, and neither is left to revoke.
  const patched = await kubeRequest(
    cluster.admin,
    "PATCH",
    rbac("rolebindings", "gmsa-use-ordersapp-two", "revoking"),
    {
      subjects: [
        { kind: "ServiceAccount", name: "two", namespace: "revoking" },
        { kind: "ServiceAccount", name: "one", namespace: "revoking" },
      ],
    },
    "application/merge-patch+json",
  );
  assert.is(patched.status, 200, JSON.stringify(patched.body));
  const second = await credspecCommand(cluster, ["revoke", "ordersapp", "--service-account", "revoking/two", "--cluster-wide", "--apply"]);
  assert.equal(second.stdout.trim().split("\n"), [
    "kept RoleBinding revoking/gmsa-use-ordersapp-two: its subjects were changed since grant made it",
    "kept ClusterRole gmsa-use-ordersapp: still bound by RoleBinding revoking/gmsa-use-ordersapp-two",
  ]);
  assert.is((await kubeRequest(cluster.admin, "GET", rbac("clusterroles", "gmsa-use-ordersapp"))).status, 200);
});

E2e("a delete guarded by what was read keeps an object changed since (what revoke relies on)", async ({ cluster }) => {
  await cluster.apply([{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "guarded", namespace: "shop" }, data: { a: "1" } }]);
  const ref = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "guarded", namespace: "shop" } };
  await withKubeObjects(cluster.admin, async (client) => {
    const read = await client.read(ref);
    const since = { uid: read!.metadata.uid!, resourceVersion: read!.metadata.resourceVersion! };
    await cluster.apply([{ ...ref, data: { a: "2" } }]);
    const refused = await client.remove(ref, { unchangedSince: since }).then(
      () => undefined,
      (error: unknown) => error,
    );
    assert.ok(isConflict(refused), String(refused));
    assert.ok(await client.read(ref), "the changed object is kept");
    const now = await client.read(ref);
    assert.is(await client.remove(ref, { unchangedSince: { uid: now!.metadata.uid!, resourceVersion: now!.metadata.resourceVersion! } }), "deleted");
  });
});

E2e("who-can-use of a name that does not exist says so, and names the grants a typo left", async ({ cluster }) => {
  // cluster-admin and the wildcard ClusterRole of an earlier test grant every name; none names this one.
  const none = await credspecCommand(cluster, ["who-can-use", "no-such-spec"]);
  assert.is(none.code, 0, none.stderr);
  assert.match(none.stdout, /^GMSACredentialSpec "no-such-spec" does not exist; no grant names it\nKIND/);
  assert.is((await credspecCommand(cluster, ["grant", "no-such-spec", "--service-account", "shop/orders", "--apply"])).code, 0);
  const granted = await credspecCommand(cluster, ["who-can-use", "no-such-spec"]);
  assert.match(
    granted.stdout,
    /^GMSACredentialSpec "no-such-spec" does not exist; granted by name through RoleBinding shop\/gmsa-use-no-such-spec-orders \(a typo, or a spec renamed or deleted\)\nKIND/,
  );
  assert.match(granted.stdout, /ServiceAccount +shop\/orders +shop +allowed/);
  const existing = await credspecCommand(cluster, ["who-can-use", "ordersapp"]);
  assert.not.match(existing.stdout, /does not exist/);
});

function binding(namespace: string, account: string, kind: "Role" | "ClusterRole", role: string) {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: `e2e-${account}`, namespace },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name: role },
    subjects: [{ kind: "ServiceAccount", name: account, namespace }],
  };
}

E2e.run();
