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

function fakeConnection(answer: (path: string) => { status: number; body?: unknown }): ApiServerConnection & { paths: string[] } {
  const paths: string[] = [];
  return {
    server: "https://api.test",
    paths,
    async send(call: ApiRequest): Promise<ApiReply> {
      paths.push(call.path);
      const { status, body } = answer(call.path.split("?")[0]!);
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

Reads.run();
