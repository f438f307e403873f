import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { ApiReply, ApiRequest, ApiServerConnection } from "../../../lib/kube/apiServerConnection.js";
import { auditOverConnection } from "../../../lib/kube/auditReads.js";
import { relayName } from "../../../lib/wiring/relayIngress.js";

/**
 * The audit's reads against an API server that answers each path as a test says: what it does
 * with an object it may not read. A real API server answers the same reads in test/e2e/audit.test.ts.
 */
const Reads = suite("the audit's reads");

const relayNamespace = "gmsa-relay";

/** Webhook configurations that call the relay, as relay wiring stores them. */
function relayWired(kind: string) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind,
    metadata: { name: "gmsa-admission" },
    webhooks: [{ name: "w.gmsa-admission.windows.k8s.io", clientConfig: { service: { name: relayName, namespace: relayNamespace, path: "/mutate" } } }],
  };
}

function fakeConnection(answer: (path: string) => { status: number; body?: unknown }): ApiServerConnection & { paths: string[]; calls: ApiRequest[] } {
  const paths: string[] = [];
  const calls: ApiRequest[] = [];
  return {
    server: "https://api.test",
    paths,
    calls,
    async send(call: ApiRequest): Promise<ApiReply> {
      paths.push(call.path);
      calls.push(call);
      const { status, body } = answer(call.path.split("?")[0]!);
      // A body longer than the call allows is not read, as the real connection does.
      if (call.maxBodyBytes !== undefined && Buffer.byteLength(JSON.stringify(body ?? "")) > call.maxBodyBytes) return { status, body: undefined, warnings: [], tooLarge: true };
      return { status, body, warnings: [] };
    },
    stream: () => Promise.reject(new Error("no stream here")),
    close: async () => {},
  };
}

const emptyList = { status: 200, body: { metadata: {}, items: [] } };

Reads("a role that may not list the relay's NetworkPolicies: named as unreadable, and the credential specs are still audited", async () => {
  const connection = fakeConnection((path) => {
    if (path.endsWith("/networkpolicies")) return { status: 403 };
    if (path === "/apis/windows.k8s.io/v1/gmsacredentialspecs") {
      return { status: 200, body: { metadata: {}, items: [{ metadata: { name: "broken" }, credspec: { CmsPlugins: ["ActiveDirectory"] } }] } };
    }
    if (path.endsWith("/mutatingwebhookconfigurations/gmsa-admission")) return { status: 200, body: relayWired("MutatingWebhookConfiguration") };
    if (path.endsWith("/validatingwebhookconfigurations/gmsa-admission")) return { status: 200, body: relayWired("ValidatingWebhookConfiguration") };
    if (path.split("/").length > 5 && !path.startsWith("/api/v1/")) return { status: 404 };
    return emptyList;
  });
  const audit = await auditOverConnection(connection, { randomHostname: false, signal: new AbortController().signal });
  assert.ok(
    connection.paths.some((path) => path.startsWith(`/apis/networking.k8s.io/v1/namespaces/${relayNamespace}/networkpolicies`)),
    "the relay's NetworkPolicies were asked for",
  );
  const unreadable = audit.findings.filter((f) => f.kind === "wiringUnreadable");
  assert.equal(
    unreadable.map((f) => f.object),
    [`NetworkPolicies in namespace ${relayNamespace}`],
  );
  assert.ok(
    audit.findings.some((f) => f.object === "GMSACredentialSpec broken" && f.severity === "error"),
    JSON.stringify(audit.findings.map((f) => `${f.kind} ${f.object}`)),
  );
});

Reads("a role that may not list credential specs fails the audit, saying what to wire", async () => {
  const connection = fakeConnection((path) => (path === "/apis/windows.k8s.io/v1/gmsacredentialspecs" ? { status: 403 } : emptyList));
  const error = await auditOverConnection(connection, { randomHostname: false, signal: new AbortController().signal }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.instance(error, Error);
  assert.match((error as Error).message, /may not list GMSACredentialSpecs: the audit needs list on pods, RBAC objects and NetworkPolicies/);
});

Reads(
  "credential specs are read as the cache reads them and kept within its bound: a spec too large for admission is an error finding, a cluster past the bound fails the audit",
  async () => {
    const spec = (name: string, credspec: unknown) => ({ metadata: { name }, credspec });
    const fine = { CmsPlugins: ["ActiveDirectory"] };
    const items = [spec("big", { ...fine, Padding: "x".repeat(300 * 1024) }), spec("padded", { ...fine, Padding: Array.from({ length: 10_000 }, () => ({})) })];
    // A pod naming the large spec: said of the spec, not as a pod whose spec is missing or changed.
    const pod = {
      metadata: { name: "web-0", namespace: "apps" },
      spec: { serviceAccountName: "web", securityContext: { windowsOptions: { gmsaCredentialSpecName: "big", gmsaCredentialSpec: "{}" } }, containers: [{ name: "app" }] },
    };
    // A pod that names no spec is read and counted, and not kept: kept, it alone would pass the bound.
    const plainPod = { metadata: { name: "other", namespace: "apps", annotations: { note: "z".repeat(3_000_000) } }, spec: { containers: [{ name: "app" }] } };
    const answer = (path: string) => {
      if (path === "/apis/windows.k8s.io/v1/gmsacredentialspecs") return { status: 200, body: { metadata: {}, items } };
      if (path === "/api/v1/pods") return { status: 200, body: { metadata: {}, items: [pod, plainPod] } };
      if (path.split("/").length > 5 && !path.startsWith("/api/v1/")) return { status: 404 };
      return emptyList;
    };
    const connection = fakeConnection(answer);
    const audit = await auditOverConnection(connection, { randomHostname: false, signal: new AbortController().signal, maxKeptBytes: 4_000_000 });
    const listed = connection.calls.find((c) => c.path.startsWith("/apis/windows.k8s.io/v1/gmsacredentialspecs?"))!;
    assert.is(new URLSearchParams(listed.path.split("?")[1]).get("limit"), "100");
    assert.is(listed.maxBodyBytes, 4 * 1024 * 1024);
    const about = (object: string) => audit.findings.filter((f) => f.object === object).map((f) => `${f.kind}: ${f.problem}`);
    assert.equal(about("GMSACredentialSpec big").length, 1);
    assert.match(about("GMSACredentialSpec big")[0]!, /^invalidCredSpec: takes more than 256 KiB as JSON/);
    assert.equal(
      about("Pod apps/web-0").filter((f) => /^pod(CredSpecMissing|ContentsDrift)/.test(f)),
      [],
      "no podCredSpecMissing or podContentsDrift for it",
    );
    // The same padding, counted as it is held (10 000 empty objects take over 700 KB), past a bound.
    const bounded = await auditOverConnection(fakeConnection(answer), { randomHostname: false, signal: new AbortController().signal, maxKeptBytes: 500_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.match(String(bounded), /the cluster's credential specs and the pods that name them take more than 500000 bytes of memory; the audit reads no further/);
    // A page longer than a page may be is asked for again, half as long: 20 specs of 250 KiB are
    // read 13 at a time; one object longer than a whole page fails the audit.
    const paging = (all: unknown[]) => {
      const connection = fakeConnection((path) => (path === "/apis/windows.k8s.io/v1/gmsacredentialspecs" ? { status: 200 } : answer(path)));
      const send = connection.send.bind(connection);
      connection.send = async (call) => {
        if (!call.path.startsWith("/apis/windows.k8s.io/v1/gmsacredentialspecs?")) return send(call);
        connection.calls.push(call);
        const query = new URLSearchParams(call.path.split("?")[1]);
        const from = Number(query.get("continue") ?? 0);
        const limit = Number(query.get("limit"));
        const body = { metadata: from + limit < all.length ? { continue: String(from + limit) } : {}, items: all.slice(from, from + limit) };
        if (Buffer.byteLength(JSON.stringify(body)) > call.maxBodyBytes!) return { status: 200, body: undefined, warnings: [], tooLarge: true };
        return { status: 200, body, bytes: Buffer.byteLength(JSON.stringify(body)), warnings: [] };
      };
      return connection;
    };
    const long = Array.from({ length: 20 }, (_, i) => spec(`s${i}`, { ...fine, Padding: "y".repeat(250 * 1024) }));
    const halving = paging(long);
    const read = await auditOverConnection(halving, { randomHostname: false, signal: new AbortController().signal });
    assert.is(read.read.credSpecs, 20);
    assert.equal(
      halving.calls.filter((c) => c.path.startsWith("/apis/windows.k8s.io/v1/gmsacredentialspecs?")).map((c) => new URLSearchParams(c.path.split("?")[1]).get("limit")),
      ["100", "50", "25", "13", "13"],
    );
    const huge = [spec("huge", { ...fine, Padding: "z".repeat(5 * 1024 * 1024) })];
    const failed = await auditOverConnection(paging(huge), { randomHostname: false, signal: new AbortController().signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.match(String(failed), /one of the list of GMSACredentialSpecs is larger than 4194304 bytes/);
  },
);

Reads("of roles and bindings only what could grant use is kept, counted in the same bound, and their pages are bounded", async () => {
  const names = (prefix: string) => Array.from({ length: 40_000 }, (_, i) => `${prefix}-${i}`);
  const role = (name: string, verbs: string[]) => ({ metadata: { name, namespace: "apps" }, rules: [{ verbs, apiGroups: ["*"], resources: ["*"], resourceNames: names(name) }] });
  const rolesAnswer = (items: unknown[]) => (path: string) =>
    path === "/apis/rbac.authorization.k8s.io/v1/roles"
      ? { status: 200, body: { metadata: {}, items } }
      : path.split("/").length > 5 && !path.startsWith("/api/v1/")
        ? { status: 404 }
        : emptyList;
  const audit = (items: unknown[]) =>
    auditOverConnection(fakeConnection(rolesAnswer(items)), { randomHostname: false, signal: new AbortController().signal, maxKeptBytes: 1_000_000 }).then(
      () => "audited",
      (e: unknown) => String(e),
    );
  // Rules that cannot grant use are not kept: 40 000 names in a `get` rule cost nothing.
  assert.is(await audit([role("reader", ["get", "list"])]), "audited");
  // The same names in a rule that grants every verb are kept, and counted.
  assert.match(await audit([role("everything", ["*"])]), /take more than 1000000 bytes of memory/);
  const listed = fakeConnection(rolesAnswer([]));
  await auditOverConnection(listed, { randomHostname: false, signal: new AbortController().signal });
  const rbacCall = listed.calls.find((c) => c.path.startsWith("/apis/rbac.authorization.k8s.io/v1/roles?"))!;
  assert.is(new URLSearchParams(rbacCall.path.split("?")[1]).get("limit"), "100");
  assert.is(rbacCall.maxBodyBytes, 4 * 1024 * 1024);
});

Reads("the relay's NetworkPolicies are read in bounded pages and counted in the same bound", async () => {
  const policy = { metadata: { name: "wide", namespace: relayNamespace }, spec: { podSelector: {}, ingress: Array.from({ length: 20_000 }, () => ({})) } };
  const connection = fakeConnection((path) => {
    if (path.endsWith("/networkpolicies")) return { status: 200, body: { metadata: {}, items: [policy] } };
    if (path.endsWith("/mutatingwebhookconfigurations/gmsa-admission")) return { status: 200, body: relayWired("MutatingWebhookConfiguration") };
    if (path.endsWith("/validatingwebhookconfigurations/gmsa-admission")) return { status: 200, body: relayWired("ValidatingWebhookConfiguration") };
    if (path.split("/").length > 5 && !path.startsWith("/api/v1/")) return { status: 404 };
    return emptyList;
  });
  const refused = await auditOverConnection(connection, { randomHostname: false, signal: new AbortController().signal, maxKeptBytes: 1_000_000 }).then(
    () => "audited",
    (e: unknown) => String(e),
  );
  assert.match(refused, /take more than 1000000 bytes of memory/);
  const listed = connection.calls.find((c) => c.path.includes("/networkpolicies?"))!;
  assert.is(new URLSearchParams(listed.path.split("?")[1]).get("limit"), "100");
  assert.is(listed.maxBodyBytes, 4 * 1024 * 1024);
});

Reads("a list that gives a continue token twice, or pages of nothing without end, fails the audit in a few calls", async () => {
  for (const [pageOf, expected] of [
    [() => ({ metadata: { continue: "0" }, items: [{ metadata: { name: "p", namespace: "a" }, spec: { containers: [] } }] }), /gave the same continue token twice/],
    [(n: number) => ({ metadata: { continue: String(n) }, items: [] }), /sent 10 pages in a row with nothing in them/],
  ] as const) {
    let calls = 0;
    const connection = fakeConnection((path) =>
      path === "/api/v1/pods" ? { status: 200, body: pageOf(++calls) } : path.split("/").length > 5 && !path.startsWith("/api/v1/") ? { status: 404 } : emptyList,
    );
    const failed = await auditOverConnection(connection, { randomHostname: false, signal: AbortSignal.timeout(5000) }).then(
      () => "audited",
      (e: unknown) => String(e),
    );
    assert.match(failed, expected);
    assert.ok(calls <= 10, `${calls} pod lists`);
  }
});

Reads.run();
