import { KubeConfig } from "@kubernetes/client-node";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { applyObjects } from "./applyObjects.js";
import { withKubeObjects } from "./kubeObjects.js";
import { describeChange, objectRef, planChanges } from "./changePlan.js";
import { readClusterState, type ClusterState } from "./clusterState.js";
import { clusterManifests, relayCaBundle, type KubernetesObject } from "./manifests.js";
import { findPolicyEngine, policyEngineWarning } from "./networkPolicyEngine.js";
import { ensureOwnNamespace, ForeignNamespaceError, readNamespaceOwnership } from "./namespaceOwnership.js";
import { clusterSecretSettingName, memberPathPrefix, memberUrlPathPrefix } from "./fleetMember.js";
import { relayName, type RelayCertificate } from "./relay.js";
import { clusterSecretInclude } from "./relayNginxConf.js";
import { previousRelayCas } from "./relayCaRotation.js";
import { issueRelayCertificate, reusableRelayCertificate } from "./relayCertificate.js";
import { RolloutTimeoutError, waitForRollout } from "./relayRollout.js";
import { otherWebhookNotice } from "./otherGmsaWebhooks.js";
import { checkReadiness, safetyNetState } from "./readiness.js";
import { uninstall } from "./uninstall.js";
import { parseWireArguments, usage, UsageError, type ReadinessCheck, type WireEnvironment, type WireRequest } from "./wireArguments.js";

/** `npm run wire`: renders the cluster's objects, applies them, shows a diff, or removes them. */
export interface WireIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** The cluster to apply to; read only when the command needs one. */
  readonly kubeConfig: () => KubeConfig;
  /** Where GMSA_CLUSTER_SECRET is read from (the process's environment in `npm run wire`). */
  readonly env?: WireEnvironment;
}

export const exitCodes = { ok: 0, failed: 1, usage: 2 } as const;

export function defaultKubeConfig(): KubeConfig {
  const config = new KubeConfig();
  config.loadFromDefault();
  return config;
}

/** Plain YAML documents, long lines kept whole (CEL expressions, certificates). */
export function toYaml(objects: readonly KubernetesObject[]): string {
  return objects.map((object) => stringify(object, { lineWidth: 0 })).join("---\n");
}

function fileName(index: number, object: KubernetesObject): string {
  return `${String(index + 1).padStart(2, "0")}-${object.kind.toLowerCase()}-${object.metadata.name}.yaml`;
}

/**
 * One file per object, numbered in apply order (`kubectl apply -f DIR` keeps that order). Secrets,
 * and whatever else `secret` says carries one, are readable by their owner only.
 */
export function writeObjectFiles(dir: string, objects: readonly KubernetesObject[], secret: (object: KubernetesObject) => boolean = () => false): string[] {
  mkdirSync(dir, { recursive: true });
  return objects.map((object, index) => {
    const path = join(dir, fileName(index, object));
    writeFileSync(path, stringify(object, { lineWidth: 0 }), { mode: object.kind === "Secret" || secret(object) ? 0o600 : 0o644 });
    return path;
  });
}

type Install = Extract<WireRequest, { action: "install" }>;

async function relayCertificate(request: Install, state: ClusterState | undefined, io: WireIo): Promise<RelayCertificate> {
  if (state?.relayCertificate && !request.rotateCertificate) {
    const reused = await reusableRelayCertificate(state.relayCertificate, request.namespace);
    if (reused) {
      io.stderr("relay certificate: the one in the cluster is still good; kept (--rotate-certificate replaces it)\n");
      return reused;
    }
  }
  io.stderr(`relay certificate: issued for ${request.namespace}\n`);
  return issueRelayCertificate(request.namespace);
}

export function renderWiring(request: Install, includeCrd: boolean, certificate: RelayCertificate | undefined, previousRelayCaPem = ""): KubernetesObject[] {
  const target =
    request.mode === "relay" && certificate !== undefined && request.functionKey !== undefined
      ? ({
          kind: "relay",
          function: request.function,
          functionKey: request.functionKey,
          certificate,
          namespace: request.namespace,
          image: request.image,
          resolver: request.resolver,
          allowFrom: request.relayAllowFrom,
          ...(request.cluster === undefined ? {} : { cluster: request.cluster }),
        } as const)
      : ({
          kind: "url",
          baseUrl: request.functionUrl,
          ...(request.caBundlePem === undefined ? {} : { caBundlePem: request.caBundlePem }),
          ...(request.cluster === undefined ? {} : { pathPrefix: memberUrlPathPrefix(request.cluster) }),
        } as const);
  return clusterManifests({
    target,
    subject: { kind: "User", name: request.identity },
    timeoutSeconds: request.timeoutSeconds,
    includeCrd,
    authorizeRequestingUser: request.authorizeRequestingUser,
    canary: request.canary,
    safetyNet: request.safetyNet,
    audit: request.audit,
    ...(certificate && previousRelayCaPem !== "" ? { relayCaBundlePem: relayCaBundle(certificate.caPem, previousRelayCaPem) } : {}),
  });
}

const isWebhookConfiguration = (object: KubernetesObject) => object.kind === "MutatingWebhookConfiguration" || object.kind === "ValidatingWebhookConfiguration";

/**
 * A new relay certificate (or a rotation left unfinished) in two steps, so that whichever relay
 * pod answers, the API server trusts it: first the webhook configurations trust the old CAs and
 * the new one, before the new Secret and Deployment exist; then, once every pod runs the new
 * template, they trust the new CA alone. If the rollout does not finish in time both stay trusted
 * and the next wiring, which finds the old CA still in the caBundle, finishes the job.
 */
async function applyRotation(config: KubeConfig, request: Install, bridging: KubernetesObject[], final: KubernetesObject[], io: WireIo): Promise<void> {
  await applyObjects(config, bridging.filter(isWebhookConfiguration));
  io.stderr("relay certificate: the webhooks trust the old and the new relay CA while the relay's pods roll over\n");
  await applyObjects(config, bridging);
  for (const object of bridging) io.stdout(`${objectRef(object)}: applied\n`);
  try {
    await waitForRollout(config, request.namespace, relayName, { timeoutMs: request.rolloutTimeoutSeconds * 1000 });
  } catch (error) {
    if (!(error instanceof RolloutTimeoutError)) throw error;
    throw new Error(
      `${error.message}. The webhooks keep trusting the old and the new relay CA, so GMSA pods are admitted whichever relay pod answers. ` +
        `Once \`kubectl -n ${request.namespace} rollout status deployment/${relayName}\` reports the rollout done, wire again: that drops the old CA`,
    );
  }
  await applyObjects(config, final.filter(isWebhookConfiguration));
  io.stderr("relay certificate: the relay's pods all serve the new certificate; the old CA is no longer trusted\n");
}

/**
 * Whether this wiring replaces the member secret the cluster's wiring presents now: the relay's
 * Secret holds another one, or the webhooks call the member's paths with another one.
 */
function memberSecretChanges(request: Install, state: ClusterState | undefined): boolean {
  if (request.cluster === undefined || state === undefined) return false;
  if (request.mode === "relay") return state.relayClusterSecretInclude !== undefined && state.relayClusterSecretInclude !== clusterSecretInclude(request.cluster.secret);
  const member = `${request.functionUrl}${memberPathPrefix(request.cluster.name)}/`;
  const wanted = `${request.functionUrl}${memberUrlPathPrefix(request.cluster)}/`;
  return state.webhookUrls.some((url) => url.startsWith(member) && !url.startsWith(wanted));
}

/**
 * A new member secret reaches the relay's pods only as they are replaced (nginx reads its files at
 * start): until the rollout is done some still send the old one, which the function must keep
 * accepting. Waits for it, then says that the old one may go.
 */
async function finishSecretRotation(config: KubeConfig, request: Install, io: WireIo, rolledOver: boolean): Promise<void> {
  const setting = clusterSecretSettingName(request.cluster?.name ?? "");
  if (request.mode === "url") {
    io.stderr(
      `cluster secret: the webhooks now call with the new secret (the API server takes up changed configurations within seconds); then ${setting} may hold the new one alone\n`,
    );
    return;
  }
  if (!rolledOver) {
    try {
      await waitForRollout(config, request.namespace, relayName, { timeoutMs: request.rolloutTimeoutSeconds * 1000 });
    } catch (error) {
      if (!(error instanceof RolloutTimeoutError)) throw error;
      throw new Error(
        `${error.message}. Relay pods that still run send the old cluster secret: keep both in ${setting} ("new,old") until ` +
          `\`kubectl -n ${request.namespace} rollout status deployment/${relayName}\` reports the rollout done`,
      );
    }
  }
  io.stderr(`cluster secret: every relay pod sends the new secret; ${setting} may now hold the new one alone\n`);
}

/**
 * What to say about a relay whose stored NetworkPolicies let more than the API server in
 * (docs/wiring.md, "Relays wired before the wiring sent wire JSON").
 */
function openRelayWarning(request: Install, open: { readonly namespace: string; readonly why: string }): string {
  const risk = "pods can reach the relay, which adds the function key, and read the contents of any credential spec some service account may use";
  const ours = request.mode === "relay" && open.namespace === request.namespace;
  const remedy = !ours
    ? `this wiring does not change that relay: wire it again, or delete it if nothing calls it any more (kubectl delete namespace ${open.namespace})`
    : request.dryRun
      ? "the plan below shows what the apply restores to the relay's own policy"
      : "this wiring restores the relay's own policy; any other policy that opens it stays as it is";
  return `warning: the relay in namespace ${open.namespace} is open: ${open.why}; ${risk}; ${remedy}\n`;
}

async function install(request: Install, io: WireIo): Promise<void> {
  for (const notice of request.notices ?? []) io.stderr(notice);
  if (request.caBundleDropped !== undefined && request.caBundleDropped.length > 0) {
    io.stderr(
      `--ca-bundle-file: left out ${request.caBundleDropped.length} PEM block(s) that are not certificates (${request.caBundleDropped.join(", ")}); only certificates go into the webhook configurations\n`,
    );
  }
  const config = request.apply ? io.kubeConfig() : undefined;
  const state = config ? await readClusterState(config, request.namespace) : undefined;
  for (const other of state?.otherGmsaWebhooks ?? []) io.stderr(otherWebhookNotice(other));
  for (const open of state?.openRelays ?? []) io.stderr(openRelayWarning(request, open));
  let includeCrd = request.includeCrd;
  if (state?.crd === "foreign") {
    io.stderr("GMSACredentialSpec CRD: installed by someone else (such as the AKS gMSA add-on); left as it is\n");
    includeCrd = false;
  }
  if (config && request.mode === "relay" && !request.adoptNamespace && (await readNamespaceOwnership(config, request.namespace)) === "foreign") {
    throw new ForeignNamespaceError(request.namespace);
  }
  if (config && request.mode === "relay") {
    const warning = await withKubeObjects(config, async (client) =>
      policyEngineWarning(await findPolicyEngine(async (namespace) => ({ items: await client.list("apps/v1", "DaemonSet", namespace) }))),
    );
    if (warning !== "") io.stderr(warning);
  }
  const certificate = request.mode === "relay" ? await relayCertificate(request, state, io) : undefined;
  const objects = renderWiring(request, includeCrd, certificate);
  const secretChanges = memberSecretChanges(request, state);
  const previousCas =
    certificate && state ? previousRelayCas(certificate.caPem, [...(state.relayCertificate?.caPem ? [state.relayCertificate.caPem] : []), ...state.relayCaBundles]) : "";

  if (request.certificateOutDir && certificate) {
    mkdirSync(request.certificateOutDir, { recursive: true });
    writeFileSync(join(request.certificateOutDir, "ca.crt"), certificate.caPem);
    writeFileSync(join(request.certificateOutDir, "tls.crt"), certificate.certPem);
    writeFileSync(join(request.certificateOutDir, "tls.key"), certificate.keyPem, { mode: 0o600 });
    // An existing file keeps its mode through a write: the key is made the owner's alone either way.
    chmodSync(join(request.certificateOutDir, "tls.key"), 0o600);
    io.stderr(`relay certificate written to ${request.certificateOutDir}\n`);
  }
  if (request.outDir) {
    // url wiring puts the member's secret in the webhook configurations' URLs.
    const carriesSecret = (object: KubernetesObject) => request.cluster !== undefined && request.mode === "url" && isWebhookConfiguration(object);
    const written = writeObjectFiles(request.outDir, objects, carriesSecret);
    io.stderr(`${written.length} objects written to ${request.outDir}\n`);
  } else if (!config) {
    io.stdout(toYaml(objects));
  }
  if (!config) return;

  if (request.dryRun) {
    if (previousCas !== "")
      io.stderr(
        "relay certificate: would roll over in two steps (the webhooks trust the old and the new CA until the relay's pods all serve the new one); the plan shows the end state\n",
      );
    if (secretChanges) {
      io.stderr(
        `cluster secret: would be replaced; ${clusterSecretSettingName(request.cluster?.name ?? "")} must accept the new and the old one ("new,old") until the wiring says the old may go\n`,
      );
    }
    for (const change of await planChanges(config, objects)) io.stdout(`${describeChange(change)}\n`);
    return;
  }
  if (request.mode === "relay") {
    // Created as the wiring's own, so that --uninstall deletes it and nothing else's. (The canary's
    // namespace is applied like any object, and --uninstall leaves it: it may predate the wiring.)
    const namespace = objects.find((object) => object.kind === "Namespace" && object.metadata.name === request.namespace);
    if (namespace) {
      const outcome = await ensureOwnNamespace(config, namespace, { adopt: request.adoptNamespace });
      if (outcome === "adopted") io.stderr(`namespace ${request.namespace}: recorded as the wiring's own (--adopt-namespace)\n`);
    }
  }
  if (previousCas !== "") {
    await applyRotation(config, request, renderWiring(request, includeCrd, certificate, previousCas), objects, io);
    if (secretChanges) await finishSecretRotation(config, request, io, true);
    return;
  }
  await applyObjects(config, objects);
  for (const object of objects) io.stdout(`${objectRef(object)}: applied\n`);
  if (secretChanges) await finishSecretRotation(config, request, io, false);
}

function failureMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The readiness check, asked again while its answer is not the right one and time is left: just
 * after wiring, a relay may still be rolling out or an API server still loading the webhook
 * configurations. Says the outcome in plain words; exit 1 unless ready.
 */
async function readinessCheck(check: ReadinessCheck, io: WireIo): Promise<number> {
  const deadline = Date.now() + check.timeoutSeconds * 1000;
  for (let attempt = 1; ; attempt++) {
    const result = await checkReadiness(io.kubeConfig(), { namespace: check.namespace, serviceAccount: check.serviceAccount });
    if (result.hop === "ready") {
      io.stdout(`check: ${result.summary}\n`);
      io.stdout(`check: ${await safetyNetState(io.kubeConfig())}\n`);
      return exitCodes.ok;
    }
    // Wrong inputs stay wrong however long one waits.
    if (Date.now() >= deadline || result.hop === "checkInput") {
      io.stderr(`check: NOT READY (${result.hop}): ${result.summary}\ncheck: the API server answered ${result.detail}\n`);
      return exitCodes.failed;
    }
    if (attempt === 1) io.stderr(`check: not ready yet (${result.hop}); asking again for up to ${check.timeoutSeconds} s\n`);
    await new Promise((resolve) => setTimeout(resolve, readinessRetryMs));
  }
}

const readinessRetryMs = 3_000;

/** Whatever the command writes, an error the API server words included, never shows the member's secret. */
function redacting(io: WireIo, secret: string): WireIo {
  const redact = (text: string) => text.split(secret).join("<cluster secret>");
  return { ...io, stdout: (text) => io.stdout(redact(text)), stderr: (text) => io.stderr(redact(text)) };
}

export async function runWire(argv: readonly string[], io: WireIo): Promise<number> {
  let request: WireRequest;
  try {
    request = parseWireArguments(argv, io.env ?? {});
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr(`wire: ${error.message}\n(npm run wire -- --help for the options)\n`);
    return exitCodes.usage;
  }
  if (request.action === "install" && request.cluster !== undefined) io = redacting(io, request.cluster.secret);
  try {
    switch (request.action) {
      case "help":
        io.stdout(usage);
        return exitCodes.ok;
      case "uninstall":
        for (const removal of await uninstall(io.kubeConfig(), request.namespace, { dryRun: request.dryRun })) io.stdout(`${removal.object}: ${removal.outcome}\n`);
        return exitCodes.ok;
      case "check":
        return await readinessCheck(request.check, io);
      case "install":
        await install(request, io);
        return request.check ? await readinessCheck(request.check, io) : exitCodes.ok;
    }
  } catch (error) {
    io.stderr(`wire: ${failureMessage(error)}\n`);
    return exitCodes.failed;
  }
}
