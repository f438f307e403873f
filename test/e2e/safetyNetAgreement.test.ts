import { KubeConfig } from "@kubernetes/client-node";
import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyObjects } from "../../cluster/applyObjects.js";
import { credSpecCrd } from "../../lib/wiring/credSpecCrd.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { safetyNetObjects } from "../../lib/wiring/safetyNet.js";
import { startControlPlane, type ControlPlane } from "../../controlplane/start.js";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFixture } from "../support/fixtures.js";
import { postReview } from "../support/httpsClient.js";
import { kubeRequest } from "../support/kubeRequest.js";
import { startLocalWebhook, type LocalWebhook } from "../support/localWebhook.js";
import { review } from "../support/reviews.js";

/**
 * The in-cluster policy and the function agree, over random pods and grants, through a real
 * kube-apiserver: the policy never refuses a pod the function admits, and it refuses every pod the
 * function refuses on a rule it holds too (`use`, names, contents without a name). Each pod is
 * created for real with only the policy in the way (then deleted), and judged by the function as
 * the API server would have it judged: mutate, its patch applied, then validate.
 * SAFETY_NET_AGREEMENT_RUNS sets how many (`npm run fuzz -- safety-net` runs many).
 */
const runs = Number(process.env.SAFETY_NET_AGREEMENT_RUNS ?? 60);
const namespace = "agree";
const accounts = ["sa-a", "sa-b", "sa-c"] as const;
const specs = ["spec-0", "spec-1", "spec-2"] as const;
/** Who may use what: sa-a two specs, sa-b one, sa-c none. `spec-9` never exists. */
const grants: Record<string, readonly string[]> = { "sa-a": ["spec-0", "spec-1"], "sa-b": ["spec-2"], "sa-c": [] };

interface Context {
  controlPlane?: ControlPlane;
  admin: KubeConfig;
  webhook?: LocalWebhook;
  contents: Record<string, string>;
}

const Agreement = suite<Context>("the in-cluster policy agrees with the function", {} as Context);

Agreement.before(async (context) => {
  try {
    context.controlPlane = await startControlPlane({ withControllerManager: false, log: () => {} });
    context.admin = new KubeConfig();
    context.admin.loadFromFile(context.controlPlane.kubeconfigPath);
    context.contents = {};
    const objects: KubernetesObject[] = [credSpecCrd(), { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }];
    for (const spec of specs) {
      const object = credSpecFixture("webapp1-credspec");
      object.metadata.name = spec;
      context.contents[spec] = canonicalJson(object.credspec);
      objects.push(object as unknown as KubernetesObject);
    }
    for (const account of accounts) {
      objects.push({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: account, namespace } });
      if (grants[account]!.length === 0) continue;
      objects.push(
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "Role",
          metadata: { name: `use-${account}`, namespace },
          rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], resourceNames: [...grants[account]!], verbs: ["use"] }],
        },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: `use-${account}`, namespace },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: `use-${account}` },
          subjects: [{ kind: "ServiceAccount", name: account, namespace }],
        },
      );
    }
    objects.push(...(safetyNetObjects({ authorizeRequestingUser: false }) as KubernetesObject[]));
    await applyObjects(context.admin, objects);
    context.webhook = await startLocalWebhook({ KUBECONFIG: context.controlPlane.kubeconfigPath, GMSA_CREDSPEC_CACHE: "false", GMSA_AUTH_CACHE_TTL_SECONDS: "0" });
    const deadline = Date.now() + 20_000;
    for (let n = 0; ; n++) {
      const probe = await kubeRequest(
        context.admin,
        "POST",
        `/api/v1/namespaces/${namespace}/pods`,
        podOf({ account: "sa-c", places: [{ where: "container", name: "spec-0" }] }, `probe-${n}`, {}),
      );
      if (probe.status >= 400) break;
      if (Date.now() > deadline) throw new Error("the safety net was not enforced within 20 s");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } catch (error) {
    console.error("agreement set-up failed:", error);
    throw error;
  }
});

Agreement.after(async (context) => {
  await context.webhook?.close();
  await context.controlPlane?.stop();
});

/** One place of a pod with GMSA settings: a name (valid or not, granted or not), contents (the spec's, other, none). */
interface Place {
  readonly where: "pod" | "container" | "init" | "annotation";
  readonly name?: string;
  readonly contents?: "spec" | "other";
}

interface Case {
  readonly account: (typeof accounts)[number];
  readonly places: readonly Place[];
}

const names = fc.constantFrom<string | undefined>(...specs, "spec-9", "Bad_Name", undefined);
const place: fc.Arbitrary<Place> = fc.record(
  { where: fc.constantFrom("pod", "container", "init", "annotation"), name: names, contents: fc.constantFrom<"spec" | "other" | undefined>("spec", "other", undefined) },
  { requiredKeys: ["where"] },
);
const cases: fc.Arbitrary<Case> = fc.record({
  account: fc.constantFrom(...accounts),
  places: fc.uniqueArray(place, { minLength: 1, maxLength: 4, selector: (p) => p.where }),
});

function podOf(c: Case, name: string, contents: Record<string, string>) {
  const options = (p: Place) => {
    const text = p.contents === undefined ? undefined : p.contents === "other" ? '{"CmsPlugins":["ActiveDirectory"]}' : (contents[p.name ?? ""] ?? '{"CmsPlugins":[]}');
    // A field's name must be an object name for the API server to store the pod at all: an
    // invalid one is the annotation's to carry.
    const fieldName = p.name === "Bad_Name" ? undefined : p.name;
    return { ...(fieldName === undefined ? {} : { gmsaCredentialSpecName: fieldName }), ...(text === undefined ? {} : { gmsaCredentialSpec: text }) };
  };
  const at = (where: Place["where"]) => c.places.find((p) => p.where === where);
  const withOptions = (p: Place | undefined) => (p && Object.keys(options(p)).length > 0 ? { securityContext: { windowsOptions: options(p) } } : {});
  const annotation = at("annotation");
  const annotationText = annotation?.contents === undefined ? undefined : annotation.contents === "other" ? "{}" : (contents[annotation.name ?? ""] ?? "{}");
  const annotations = annotation
    ? {
        ...(annotation.name === undefined ? {} : { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec-name": annotation.name }),
        ...(annotationText === undefined ? {} : { "app.container.alpha.windows.kubernetes.io/gmsa-credential-spec": annotationText }),
      }
    : {};
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) },
    spec: {
      serviceAccountName: c.account,
      ...(withOptions(at("pod")).securityContext ? { securityContext: withOptions(at("pod")).securityContext } : {}),
      ...(at("init") ? { initContainers: [{ name: "setup", image: "busybox", ...withOptions(at("init")) }] } : {}),
      containers: [{ name: "app", image: "mcr.microsoft.com/windows/servercore:ltsc2022", ...withOptions(at("container")) }],
    },
  };
}

type Patch = ReadonlyArray<{ op: string; path: string; value?: unknown }>;

/** The JSON patch a mutating webhook answers (add and replace, as this product writes them), applied. */
function patched(object: unknown, patch: Patch): unknown {
  const copy = structuredClone(object) as Record<string, unknown>;
  for (const { op, path, value } of patch) {
    if (op !== "add" && op !== "replace") throw new Error(`unexpected patch op ${op}`);
    const segments = path
      .split("/")
      .slice(1)
      .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
    let at: Record<string, unknown> = copy;
    for (const segment of segments.slice(0, -1)) at = at[segment] as Record<string, unknown>;
    at[segments.at(-1)!] = value;
  }
  return copy;
}

/** The function's decision, as the API server would get it: mutate, then validate the patched pod. */
async function functionDecision(webhook: LocalWebhook, pod: unknown): Promise<{ allowed: boolean; code: number; message: string }> {
  const ask = async (path: string, object: unknown) => {
    const reply = await postReview(`${webhook.server.url}${path}`, webhook.caPem, review("CREATE", object, { namespace }));
    const response = (JSON.parse(reply.text) as { response: { allowed: boolean; patch?: string; status?: { code?: number; message?: string } } }).response;
    return response;
  };
  const mutated = await ask("/mutate", pod);
  if (!mutated.allowed) return { allowed: false, code: mutated.status?.code ?? 0, message: mutated.status?.message ?? "" };
  const patch: Patch = mutated.patch ? (JSON.parse(Buffer.from(mutated.patch, "base64").toString("utf8")) as Patch) : [];
  const validated = await ask("/validate", patched(pod, patch));
  return { allowed: validated.allowed, code: validated.status?.code ?? 200, message: validated.status?.message ?? "" };
}

/** The function's refusals on a rule the policy holds too. */
const coveredRule = /is not authorized to use GMSACredentialSpec|contents are set without a credential spec name|is not a valid GMSACredentialSpec name/;

Agreement("random pods and grants: the policy refuses exactly what the function refuses on the rules it holds, and never what the function admits", async (context) => {
  let n = 0;
  const seen = { bothAdmit: 0, bothRefuse: 0, functionOnly: 0 };
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
      const name = `p-${n++}`;
      const pod = podOf(c, name, context.contents);
      const decided = await functionDecision(context.webhook!, pod);
      const created = await kubeRequest(context.admin, "POST", `/api/v1/namespaces/${namespace}/pods`, pod);
      const message = String((created.body as { message?: unknown }).message ?? "");
      if (created.status === 201) await kubeRequest(context.admin, "DELETE", `/api/v1/namespaces/${namespace}/pods/${name}?gracePeriodSeconds=0`);
      else assert.match(message, /the in-cluster policy of gmsa-admission/, `the API server refused ${JSON.stringify(pod)} for another reason: ${message}`);
      const policyRefused = created.status !== 201;
      const story = `${JSON.stringify(c)}\nfunction: ${decided.allowed ? "admits" : `refuses ${decided.code}: ${decided.message}`}\npolicy: ${policyRefused ? `refuses: ${message}` : "admits"}`;
      if (policyRefused) assert.not.ok(decided.allowed, `the policy refuses what the function admits\n${story}`);
      if (!decided.allowed && coveredRule.test(decided.message)) assert.ok(policyRefused, `the policy admits what the function refuses on a rule it holds\n${story}`);
      if (decided.allowed) seen.bothAdmit += 1;
      else if (policyRefused) seen.bothRefuse += 1;
      else seen.functionOnly += 1;
    }),
    { numRuns: runs, ...(process.env.PROPERTY_SEED ? { seed: Number(process.env.PROPERTY_SEED) } : {}) },
  );
  console.log(
    `  ${runs} pods: ${seen.bothAdmit} admitted by both, ${seen.bothRefuse} refused by both, ${seen.functionOnly} refused by the function alone (rules the policy cannot hold)`,
  );
  // A run where one side never admits or never refuses shows nothing.
  assert.ok(seen.bothAdmit > 0 && seen.bothRefuse > 0, JSON.stringify(seen));
});

Agreement.run();
