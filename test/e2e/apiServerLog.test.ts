import { KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { deployedQueries } from "../infra/monitoringQueries.js";
import { kubeRequest } from "../support/kubeRequest.js";

/**
 * The opt-in alert on the API server's own log (infra/modules/admission-monitoring.bicep) selects
 * what a real kube-apiserver writes when it cannot call the product's webhook: a webhook
 * configuration pointing where nothing listens, a pod created, and the deployed query's terms
 * looked for in the API server's log line about it.
 */
const Log = suite<{ controlPlane?: ControlPlane; admin: KubeConfig }>("the API server's own log of a failed webhook call", {} as { admin: KubeConfig });

Log.before(async (context) => {
  context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
  context.admin = new KubeConfig();
  context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
});

Log.after(async (context) => {
  await context.controlPlane?.stop();
});

Log("a failed call to the mutating webhook is logged in words the alert's query selects", async (context) => {
  await applyObjects(context.admin, [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "app", namespace: "default" } },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name: "gmsa-admission" },
      webhooks: [
        {
          name: "mutate.gmsa-admission.windows.k8s.io",
          clientConfig: { url: "https://127.0.0.1:1/mutate" },
          rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
          failurePolicy: "Fail",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
          timeoutSeconds: 2,
        },
      ],
    },
  ] as KubernetesObject[]);
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "default" },
    spec: { serviceAccountName: "app", containers: [{ name: "app", image: "busybox" }] },
  };
  let reply = await kubeRequest(context.admin, "POST", "/api/v1/namespaces/default/pods", pod);
  for (const deadline = Date.now() + 10_000; reply.status === 201 && Date.now() < deadline;) {
    // The configuration may take a moment to be used: that pod slipped through.
    await kubeRequest(context.admin, "DELETE", "/api/v1/namespaces/default/pods/web");
    await new Promise((resolve) => setTimeout(resolve, 200));
    reply = await kubeRequest(context.admin, "POST", "/api/v1/namespaces/default/pods", pod);
  }
  assert.is(reply.status, 500, JSON.stringify(reply.body));

  const logPath = context.controlPlane!.processes.find((p) => p.name === "kube-apiserver")!.logPath;
  const lines = readFileSync(logPath, "utf8").split("\n");
  const query = (await deployedQueries()).find((q) => q.text.startsWith("AKSControlPlane"));
  assert.ok(query, "the deployed alert over the API server's log");
  const terms = [...query.text.matchAll(/Message contains "([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(terms.length >= 2, query.text);
  // Kusto's `contains` is a case-insensitive substring test.
  const selected = lines.filter((line) => terms.every((term) => line.toLowerCase().includes(term.toLowerCase())));
  assert.ok(
    selected.length > 0,
    `no API server log line holds ${terms.join(" and ")}:\n${lines
      .filter((l) => /webhook/i.test(l))
      .slice(-5)
      .join("\n")}`,
  );
});

Log.run();
