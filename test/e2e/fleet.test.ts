import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { KubeConfig } from "@kubernetes/client-node";
import { applyObjects } from "../../cluster/applyObjects.js";
import type { KubernetesObject } from "../../cluster/manifests.js";
import { auditObjects } from "../../cluster/auditRbac.js";
import { loadKubeconfigFile, localWebhookUser, startLocalCluster, wireLocalCluster, type LocalCluster } from "../../host/localCluster.js";
import { runAudit } from "../../lib/app/audit.js";
import auditSchema from "../../lib/observability/audit-log.json";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFixture } from "../support/fixtures.js";
import { httpsCall } from "../support/httpsClient.js";
import { kubeRequest, type KubeReply } from "../support/kubeRequest.js";
import { startLocalFleetWebhook, type LocalFleetWebhook } from "../support/localWebhook.js";
import { gmsa, review, type PodSpec } from "../support/reviews.js";
import { useGrant } from "../support/useGrants.js";

/**
 * One app serving two real control planes at once, each wired by url to its own member's path
 * with its own secret in it: what one cluster holds never answers for the other, a request with
 * the wrong member's secret is refused, a member left idle stops its watch until the next
 * admission, and a member whose API server stops answering fails closed alone.
 */
const names = ["alpha", "beta"] as const;
type Name = (typeof names)[number];
const ns = "e2e";
const specName = "webapp1-credspec";
const idleMs = 2_500;

interface Member {
  readonly local: LocalCluster;
  readonly admin: KubeConfig;
  readonly secret: string;
}

interface Context {
  members: Record<Name, Member>;
  webhook: LocalFleetWebhook;
}

/** The credential spec each cluster holds under the same name: its own domain's. */
function specIn(cluster: Name): KubernetesObject & { credspec: Record<string, unknown> } {
  const fixture = credSpecFixture(specName);
  const credspec = fixture.credspec ?? {};
  const domain = typeof credspec.DomainJoinConfig === "object" ? credspec.DomainJoinConfig : {};
  return {
    apiVersion: fixture.apiVersion,
    kind: fixture.kind,
    metadata: { name: specName },
    credspec: { ...credspec, DomainJoinConfig: { ...domain, DnsName: `${cluster}.contoso.com` } },
  };
}

/**
 * One kubeconfig file with a context per cluster, the current one alpha's: beta reaches its own
 * cluster only if its member's `context` is honoured.
 */
function fleetKubeconfig(members: Record<Name, Member>, dir: string): string {
  const merged = { apiVersion: "v1", kind: "Config", clusters: [] as unknown[], users: [] as unknown[], contexts: [] as unknown[], "current-context": "alpha" };
  for (const name of names) {
    const one = JSON.parse(readFileSync(members[name].local.webhookKubeconfig, "utf8"));
    merged.clusters.push({ name, cluster: one.clusters[0].cluster });
    merged.users.push({ name, user: one.users[0].user });
    merged.contexts.push({ name, context: { cluster: name, user: name } });
  }
  const path = join(dir, "fleet.kubeconfig");
  writeFileSync(path, JSON.stringify(merged), { mode: 0o600 });
  return path;
}

const Fleet = suite<Context>("a fleet of two clusters end to end");

Fleet.before(async (context) => {
  try {
    const locals = await Promise.all(names.map(() => startLocalCluster({ log: () => {} })));
    context.members = {
      alpha: { local: locals[0]!, admin: loadKubeconfigFile(locals[0]!.adminKubeconfig), secret: randomBytes(32).toString("base64url") },
      beta: { local: locals[1]!, admin: loadKubeconfigFile(locals[1]!.adminKubeconfig), secret: randomBytes(32).toString("base64url") },
    };
    const kubeconfig = fleetKubeconfig(context.members, locals[0]!.controlPlane.dataDir);
    context.webhook = await startLocalFleetWebhook(
      {
        GMSA_CLUSTERS: JSON.stringify({ alpha: { kubeconfig, context: "alpha" }, beta: { kubeconfig, context: "beta" } }),
        GMSA_CLUSTER_SECRET_ALPHA: context.members.alpha.secret,
        GMSA_CLUSTER_SECRET_BETA: context.members.beta.secret,
      },
      { idleMs },
    );
    for (const name of names) {
      const member = context.members[name];
      // url wiring: the member's path, its secret a segment of it.
      await wireLocalCluster(
        member.local,
        { url: `${context.webhook.server.url}/clusters/${name}/${member.secret}`, caPem: context.webhook.caPem, authorizeRequestingUser: false },
        [specIn(name)],
      );
      await applyObjects(member.admin, [
        { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
        ...["web", "payroll"].map((sa) => ({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: sa, namespace: ns } })),
        ...useGrant({ name: "use-webapp1", namespace: ns, credSpecs: [specName], serviceAccount: "web" }),
        // Only alpha lets payroll use its spec.
        ...(name === "alpha" ? useGrant({ name: "use-payroll", namespace: ns, credSpecs: ["payroll-gmsa"], serviceAccount: "payroll" }) : []),
      ]);
    }
  } catch (error) {
    console.error("fleet set-up failed:", error);
    throw error;
  }
});

Fleet.after(async (context) => {
  await context.webhook?.close().catch(() => {});
  await Promise.all(names.map((name) => context.members?.[name]?.local.stop().catch(() => {})));
});

let counter = 0;
function windowsPod(serviceAccountName: string, credSpec: string): PodSpec {
  return {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { name: `pod-${++counter}`, namespace: ns },
    spec: { serviceAccountName, securityContext: gmsa(credSpec), containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
  };
}

function create(member: Member, pod: PodSpec): Promise<KubeReply> {
  return kubeRequest(member.admin, "POST", `/api/v1/namespaces/${ns}/pods`, pod);
}

/** Watches of credential specs open on a cluster's API server now (the webhook's, and the garbage collector's). */
async function credSpecWatches(member: Member): Promise<number> {
  const metrics = (await kubeRequest(member.admin, "GET", "/metrics")).body as string;
  let open = 0;
  for (const line of metrics.split("\n")) {
    if (line.startsWith("apiserver_longrunning_requests{") && line.includes('resource="gmsacredentialspecs"') && line.includes('verb="WATCH"'))
      open += Number(line.split(" ").pop());
  }
  return open;
}

async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.unreachable(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

Fleet("pods in each cluster get their own cluster's credential spec under the same name", async ({ members }) => {
  for (const name of names) {
    const reply = await create(members[name], windowsPod("web", specName));
    assert.is(reply.status, 201, JSON.stringify(reply.body));
    assert.is(reply.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, canonicalJson(specIn(name).credspec));
  }
});

Fleet("one cluster's RBAC never answers for the other", async ({ members }) => {
  const allowed = await create(members.alpha, windowsPod("payroll", "payroll-gmsa"));
  assert.is(allowed.status, 201, JSON.stringify(allowed.body));
  const refused = await create(members.beta, windowsPod("payroll", "payroll-gmsa"));
  assert.is(refused.status, 403, JSON.stringify(refused.body));
  assert.match(refused.body.message, /service account "payroll" in namespace "e2e" is not authorized/);
});

Fleet("a request for alpha carrying beta's secret is refused, and the log says whose it was", async ({ members, webhook }) => {
  webhook.logs.length = 0;
  const body = JSON.stringify(review("CREATE", windowsPod("web", specName)));
  const reply = await httpsCall(`${webhook.server.url}/clusters/alpha/${members.beta.secret}/validate`, {
    ca: webhook.caPem,
    headers: { "content-type": "application/json" },
    body,
  });
  assert.is(reply.status, 401);
  assert.match(reply.text, "the cluster secret does not match");
  assert.ok(
    webhook.logs.some((l) => l.startsWith("warning") && l.includes(`request for \\"alpha\\" carried \\"beta\\"'s secret`)),
    webhook.logs.join("\n"),
  );
  assert.not.match(webhook.logs.join("\n"), members.beta.secret);
  // The same through beta's secret on its own path is answered.
  const own = await httpsCall(`${webhook.server.url}/clusters/beta/${members.beta.secret}/validate`, { ca: webhook.caPem, headers: { "content-type": "application/json" }, body });
  assert.is(own.status, 200, own.text);
});

Fleet("an idle member stops its watch, and the next admission starts it again", async ({ members, webhook }) => {
  const alpha = webhook.runtime.members.get("alpha")!;
  assert.is((await create(members.alpha, windowsPod("web", specName))).status, 201);
  await until(() => alpha.status().credSpecCache?.synced === true, "alpha's cache is synced");
  const watching = await credSpecWatches(members.alpha);
  const starts = alpha.status().starts;
  await until(() => alpha.status().state === "idle", `alpha is idle after ${idleMs} ms`, idleMs * 4);
  await until(async () => (await credSpecWatches(members.alpha)) === watching - 1, `alpha's API server shows one watch fewer than ${watching}`);
  assert.is(alpha.status().credSpecCache, undefined);
  const reply = await create(members.alpha, windowsPod("web", specName));
  assert.is(reply.status, 201, JSON.stringify(reply.body));
  assert.is(reply.body.spec.securityContext.windowsOptions.gmsaCredentialSpec, canonicalJson(specIn("alpha").credspec));
  assert.is(alpha.status().starts, starts + 1);
  await until(async () => (await credSpecWatches(members.alpha)) === watching, "alpha's watch is open again");
  console.log(`    alpha: ${watching} credential spec watches while started, ${watching - 1} while idle, ${watching} after the next admission`);
});

/** Creates pods in a cluster one after another and gives their latencies. */
async function podLatencies(member: Member, count: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const reply = await create(member, windowsPod("web", specName));
    latencies.push(performance.now() - started);
    assert.is(reply.status, 201, JSON.stringify(reply.body));
  }
  return latencies;
}

function describe(latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  return `median ${median.toFixed(1)} ms, max ${sorted[sorted.length - 1]!.toFixed(1)} ms over ${sorted.length}`;
}

Fleet("the audit of the canary's timer covers every member, each with its own findings, in one run", async ({ members, webhook }) => {
  for (const name of names) await applyObjects(members[name].admin, auditObjects({ kind: "User", name: localWebhookUser }) as KubernetesObject[]);
  // Only beta grants use on a spec it does not have.
  await applyObjects(members.beta.admin, [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "use-a-typo", namespace: ns },
      rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], resourceNames: ["webap1-credspec"], verbs: ["use"] }],
    },
  ]);
  // RBAC changes reach the authorizer a moment after they are stored.
  let lines = await runAudit(webhook.runtime, { randomHostname: false });
  for (let i = 0; i < 50 && lines.some((line) => line.event === auditSchema.summary && line.outcome !== auditSchema.audited); i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    lines = await runAudit(webhook.runtime, { randomHostname: false });
  }
  const summaries = lines.filter((line) => line.event === auditSchema.summary);
  assert.equal(summaries.map((line) => `${line.cluster} ${line.outcome}`).sort(), ["alpha audited", "beta audited"], JSON.stringify(summaries));
  const typos = lines.filter((line) => line.event === auditSchema.finding && line.kind === "grantToMissingCredSpec");
  assert.equal(
    typos.map((line) => `${line.cluster} ${line.object}`),
    [`beta Role ${ns}/use-a-typo`],
  );
  assert.is(new Set(lines.map((line) => line.run)).size, 1, "one run for the whole fleet");
});

Fleet("alpha's API server stopped: alpha fails closed, beta's admissions go on", async ({ members, webhook }) => {
  await podLatencies(members.beta, 2);
  const before = await podLatencies(members.beta, 15);
  const apiServer = members.alpha.local.controlPlane.processes.find((p) => p.name === "kube-apiserver");
  assert.ok(apiServer, "alpha's kube-apiserver process");
  // Stopped, not killed: connections to it hang, the harder case for whoever shares with it.
  process.kill(apiServer.pid, "SIGSTOP");
  try {
    // Admissions for alpha keep arriving (its API server cannot send them now: sent directly),
    // each holding alpha's calls until its budget runs out. Service accounts never asked about
    // before, so no cached answer stands in for the API server.
    const alphaReviews = Array.from({ length: 8 }, (_, i) =>
      httpsCall(`${webhook.server.url}/clusters/alpha/${members.alpha.secret}/validate`, {
        ca: webhook.caPem,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(review("CREATE", windowsPod(`never-asked-${i}`, specName))),
      }),
    );
    const during = await podLatencies(members.beta, 15);
    const alphaAnswers = await Promise.all(alphaReviews);
    for (const answer of alphaAnswers) {
      assert.is(answer.status, 200, answer.text);
      const response = JSON.parse(answer.text).response;
      assert.is(response.allowed, false);
      assert.ok([503, 504].includes(response.status.code), JSON.stringify(response.status));
    }
    console.log(`    beta pod creation, alpha up:      ${describe(before)}`);
    console.log(
      `    beta pod creation, alpha stopped: ${describe(during)} (alpha's ${alphaAnswers.length} reviews failed closed with ${[...new Set(alphaAnswers.map((a) => JSON.parse(a.text).response.status.code))].join("/")})`,
    );
  } finally {
    process.kill(apiServer.pid, "SIGCONT");
  }
});

Fleet.run();
