import { randomBytes } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { classifyReadiness, readinessPod, unknownCredSpecName, type ReadinessOptions, type ReadinessResult } from "../lib/canary/probe.js";
import { apiServerConnection, ApiServerConnectionError } from "../lib/kube/apiServerConnection.js";
import { withKubeObjects } from "./kubeObjects.js";
import { safetyNetPolicyNames } from "../lib/wiring/safetyNet.js";
import { webhookConfigurationName } from "./webhookConfigurations.js";

export { classifyReadiness, readinessPod, type ReadinessHop, type ReadinessResult } from "../lib/canary/probe.js";

/**
 * The dry run's refusal comes from the validating webhook: the mutating one leaves a name nobody
 * may use as it is, so its absence (or failurePolicy Ignore over a failing call) would go unseen,
 * and real pods would be admitted without their contents. The configurations say it: both must be
 * there, every webhook in them failing closed.
 */
async function bothWebhooksFailClosed(config: KubeConfig, ready: ReadinessResult): Promise<ReadinessResult> {
  const problems = await withKubeObjects(config, async (client) => {
    const found: string[] = [];
    for (const kind of ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]) {
      const stored = await client.read({ apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name: webhookConfigurationName } });
      const webhooks = Array.isArray(stored?.webhooks) ? (stored.webhooks as Array<{ name?: unknown; failurePolicy?: unknown }>) : [];
      if (!stored || webhooks.length === 0) found.push(`the ${kind} ${webhookConfigurationName} is missing`);
      for (const webhook of webhooks) if (webhook.failurePolicy !== "Fail") found.push(`${String(webhook.name)} has failurePolicy ${String(webhook.failurePolicy)}`);
    }
    return found;
  });
  if (problems.length === 0) return ready;
  return {
    hop: "webhooksDidNotRun",
    summary: `the validating webhook refused the pod as it must, but ${problems.join("; ")}: pods could be admitted without their contents, or unchecked when a call fails; wire again`,
    detail: ready.detail,
  };
}

/**
 * Whether the in-cluster safety net (lib/wiring/safetyNet.ts) is there, each policy with its binding:
 * said beside the answer, never a reason to fail (a cluster may be wired with --no-safety-net).
 */
export async function safetyNetState(config: KubeConfig): Promise<string> {
  const missing = await withKubeObjects(config, async (client) => {
    const absent: string[] = [];
    for (const name of safetyNetPolicyNames) {
      for (const kind of ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]) {
        if (!(await client.read({ apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name } }))) absent.push(`${kind} ${name}`);
      }
    }
    return absent;
  });
  return missing.length === 0
    ? "the in-cluster safety net is installed: the API server holds the use rule even without the webhooks"
    : `the in-cluster safety net is NOT installed (missing: ${missing.join(", ")}): without the webhooks nothing holds the use rule; wire again without --no-safety-net to install it`;
}

export async function checkReadiness(config: KubeConfig, options: ReadinessOptions = {}): Promise<ReadinessResult> {
  const namespace = options.namespace ?? "default";
  const serviceAccount = options.serviceAccount ?? "default";
  const credSpec = unknownCredSpecName(randomBytes(6).toString("hex"));
  const connection = apiServerConnection(config, { timeoutMs: options.timeoutMs ?? 45_000 });
  try {
    const reply = await connection.send({
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods?dryRun=All&fieldManager=gmsa-admission-readiness`,
      body: readinessPod(namespace, serviceAccount, credSpec),
    });
    const result = classifyReadiness(reply, credSpec);
    return result.hop === "ready" ? await bothWebhooksFailClosed(config, result) : result;
  } catch (error) {
    if (!(error instanceof ApiServerConnectionError)) throw error;
    return { hop: "unexpected", summary: "the check could not reach the API server with the current kubeconfig", detail: error.message };
  } finally {
    await connection.close();
  }
}
