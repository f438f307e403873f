import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { parseArgs } from "node:util";
import { ApiServerEndpointError, caBundlePem as certificatesOnly } from "../lib/kube/apiServerEndpoint.js";
import { clusterSecretHeader, clusterSecretSettingName, isMemberSecret, memberNamePattern, memberSecretRule, type FleetMember } from "./fleetMember.js";
import { defaultTimeoutSeconds } from "./manifests.js";
import { relayDefaultImage, relayDefaultNamespace, relayDefaultResolver, type FunctionEndpoint } from "./relay.js";
import { AllowFromError, parseRelayAllowFrom, relayDefaultAllowFrom, type RelayAllowedSource } from "./relayNetworkPolicy.js";

/**
 * What `npm run wire` was asked to do, checked before anything touches a cluster. One file past
 * 400 lines on purpose: each option's help text, parsing and checks are read together, and a
 * split by option would scatter the one usage text `--help` prints.
 */
/** Where and how long the readiness check asks (cluster/readiness.ts). */
export interface ReadinessCheck {
  readonly namespace: string;
  readonly serviceAccount: string;
  /** How long it keeps asking while the answer is not the right one yet (a relay still rolling out). */
  readonly timeoutSeconds: number;
}

export type WireRequest =
  | { readonly action: "uninstall"; readonly namespace: string; readonly dryRun: boolean }
  | { readonly action: "check"; readonly check: ReadinessCheck }
  | {
      readonly action: "install";
      readonly mode: "url" | "relay";
      readonly functionUrl: string;
      readonly function: FunctionEndpoint;
      readonly identity: string;
      readonly functionKey?: string;
      readonly caBundlePem?: string;
      /** PEM blocks of the CA bundle file that were not certificates and were left out (their labels). */
      readonly caBundleDropped?: readonly string[];
      readonly timeoutSeconds: number;
      readonly namespace: string;
      readonly image: string;
      readonly resolver: string;
      readonly relayAllowFrom: readonly RelayAllowedSource[];
      readonly outDir?: string;
      readonly certificateOutDir?: string;
      readonly apply: boolean;
      readonly dryRun: boolean;
      readonly includeCrd: boolean;
      readonly rotateCertificate: boolean;
      /** How long a certificate rotation waits for the relay's new pods before it keeps both CAs and stops. */
      readonly rolloutTimeoutSeconds: number;
      /** Claim an existing namespace as the relay's own (one the wiring made before it recorded creation). */
      readonly adoptNamespace: boolean;
      /** The function runs with GMSA_AUTHORIZE_REQUESTING_USER=true: its role may create SubjectAccessReviews. */
      readonly authorizeRequestingUser: boolean;
      /** The fleet member this cluster is (--cluster and its secret); none: today's single-cluster paths. */
      readonly cluster?: FleetMember;
      /** Said on stderr before anything else happens (never a secret). */
      readonly notices?: readonly string[];
      /** After applying, prove the path with the readiness check. */
      readonly check?: ReadinessCheck;
      /** Install the canary's namespace and grant (cluster/canary.ts); --no-canary leaves them out. */
      readonly canary: boolean;
      /** Install the in-cluster safety net (lib/wiring/safetyNet.ts); --no-safety-net leaves it out. */
      readonly safetyNet: boolean;
      /** Install the audit's read-only role (cluster/auditRbac.ts), for a function with GMSA_AUDIT. */
      readonly audit: boolean;
    }
  | { readonly action: "help" };

export class UsageError extends Error {}

export const defaultRolloutTimeoutSeconds = 300;

export const usage = `Usage: npm run wire -- --function-url https://<function host> --mode <url|relay> --identity <object ID> [options]
       npm run wire -- --uninstall --apply [--dry-run] [--namespace NS]
       npm run wire -- --check [--check-namespace NS] [--check-service-account SA]

Renders what the cluster needs (CRD, RBAC for the function's identity, the webhook
configurations, and in relay mode the relay) as YAML on stdout, or applies it.

  --function-url URL        the Function App's base URL: https, no path, query or fragment
  --mode url|relay          url: the API server calls the function directly; relay: through
                            an nginx relay in the cluster (standard AKS)
  --identity ID             who the function acts as in the cluster: the object ID of its
                            managed identity on Entra-integrated AKS
  --function-key KEY        relay mode: the function key the relay adds (x-functions-key)
  --function-key-file FILE  relay mode: the same, read from a file
  --cluster NAME            the Function App serves a fleet (GMSA_CLUSTERS) and this
                            cluster is its member NAME: url mode calls
                            /clusters/NAME/<secret>/mutate etc.; relay mode forwards to
                            /clusters/NAME/mutate etc. with the secret in ${clusterSecretHeader}.
                            The objects then carry the secret: they go to --out DIR or
                            --apply, never to stdout
  --cluster-secret-file FILE
                            the member's secret (32 to 128 of A-Z a-z 0-9 _ -, at least
                            10 different: a random one), the one
                            the function holds in GMSA_CLUSTER_SECRET_<NAME>; or set
                            GMSA_CLUSTER_SECRET. Rotating: wire with the new one while
                            the function accepts "new,old", then drop old there
  --ca-bundle-file FILE     url mode: CA bundle (PEM) that signs the function's certificate,
                            when it is not a public one
  --timeout-seconds N       how long the API server waits on a webhook, 1 to 30 (default ${defaultTimeoutSeconds})
  --namespace NS            the relay's namespace (default ${relayDefaultNamespace})
  --relay-image IMAGE       the relay's image (default ${relayDefaultImage})
  --relay-resolver ADDRESS  the DNS server the relay asks (default ${relayDefaultResolver})
  --relay-allow-from LIST   who may connect to the relay (its NetworkPolicy), comma-separated:
                            konnectivity (the API server's agents in kube-system on AKS) and/or
                            CIDRs such as the API server subnet with API Server VNet
                            Integration (default konnectivity)
  --authorize-requesting-user
                            the function runs with GMSA_AUTHORIZE_REQUESTING_USER=true:
                            let its identity create SubjectAccessReviews too (without
                            this, LocalSubjectAccessReviews only, and such a function
                            refuses every GMSA pod)
  --no-canary               leave out the canary's namespace (gmsa-admission-canary), its service
                            account and the grant that lets the function's identity ask for dry
                            runs of pods there (the function's canary then reports that it cannot).
                            --uninstall removes the grant and leaves the namespace
  --no-safety-net           leave out the in-cluster safety net: the ValidatingAdmissionPolicies
                            that hold the use rule, names and the freeze of GMSA settings even
                            where the webhooks do not run (docs/security.md). --uninstall
                            removes them either way
  --audit                   also let the function's identity list pods and RBAC objects, read-only,
                            for its credential spec audit (GMSA_AUDIT; docs/security.md).
                            --uninstall removes it either way
  --no-crd                  leave the GMSACredentialSpec CRD out (with --apply this is
                            detected: a CRD installed by someone else is never touched)
  --rotate-certificate      relay mode with --apply: issue a new relay certificate even if
                            the one in the cluster is still good
  --rollout-timeout-seconds N
                            relay mode: how long a new certificate waits for the relay's
                            pods to roll over before the old CA leaves the webhooks'
                            caBundle, 1 to 3600 (default ${defaultRolloutTimeoutSeconds}); past it both stay
                            trusted and wiring again finishes the rotation
  --adopt-namespace         relay mode with --apply: the --namespace exists, holds only the
                            relay, and was made by an earlier wiring: record it as the
                            wiring's own (--uninstall then deletes it)
  --certificate-out DIR     relay mode: also write the relay's ca.crt, tls.crt and tls.key
                            to DIR (for the Bicep module's parameters)
  --out DIR                 write one YAML file per object to DIR instead of stdout
  --print-secrets           print objects that carry secrets (relay mode: the function key and
                            the relay's TLS key; --cluster: the member's secret) to stdout all
                            the same; without it they go only to --out DIR or --apply
  --apply                   server-side apply with the current kubeconfig
  --dry-run                 with --apply: show what would change, change nothing
  --check                   prove the path a GMSA pod takes: a server-side dry run of a pod
                            naming a credential spec nobody may use, which the webhooks must
                            refuse (through the wiring, the function, its identity and the
                            cluster's RBAC); names the hop that failed, exit 1. Alone, or
                            after --apply
  --check-namespace NS      where the dry-run pod would run (default default)
  --check-service-account SA
                            its service account, which must exist there (default default)
  --check-timeout-seconds N how long to keep asking while the answer is not right yet (a relay
                            still rolling out), 0 to 600 (default 120)
  --uninstall               remove the webhook configurations first, then the relay and
                            the RBAC; the relay's namespace only if the wiring created it;
                            never the CRD or any credential spec
  --help                    this text
`;

const options = {
  "function-url": { type: "string" },
  mode: { type: "string" },
  identity: { type: "string" },
  "function-key": { type: "string" },
  "function-key-file": { type: "string" },
  cluster: { type: "string" },
  "cluster-secret-file": { type: "string" },
  "ca-bundle-file": { type: "string" },
  "timeout-seconds": { type: "string" },
  namespace: { type: "string" },
  "relay-image": { type: "string" },
  "relay-resolver": { type: "string" },
  "relay-allow-from": { type: "string" },
  "authorize-requesting-user": { type: "boolean" },
  "no-crd": { type: "boolean" },
  "no-canary": { type: "boolean" },
  "no-safety-net": { type: "boolean" },
  audit: { type: "boolean" },
  "rotate-certificate": { type: "boolean" },
  "rollout-timeout-seconds": { type: "string" },
  "adopt-namespace": { type: "boolean" },
  "certificate-out": { type: "string" },
  out: { type: "string" },
  apply: { type: "boolean" },
  "dry-run": { type: "boolean" },
  uninstall: { type: "boolean" },
  "print-secrets": { type: "boolean" },
  check: { type: "boolean" },
  "check-namespace": { type: "string" },
  "check-service-account": { type: "string" },
  "check-timeout-seconds": { type: "string" },
  help: { type: "boolean" },
} as const;

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const hostName = /^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;
/** Azure function keys are base64-like; anything else could break out of the relay's config. */
const functionKeyPattern = /^[A-Za-z0-9+/=_.-]{16,512}$/;
const reservedNamespaces = new Set(["default", "kube-system", "kube-public", "kube-node-lease"]);

function readText(file: string, what: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`${what}: cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

interface CaBundle {
  readonly pem: string;
  readonly dropped: readonly string[];
}

/**
 * The certificates of a CA bundle file, and nothing else: a file that also holds a private key
 * (a combined cert+key PEM) must not put that key into the webhook configurations, where every
 * reader of the cluster's admission configuration would see it. The labels of what was left out
 * are kept so the command can say so; the text itself is never repeated.
 */
function readCaBundle(file: string): CaBundle {
  const text = readText(file, "--ca-bundle-file");
  let pem: string;
  try {
    pem = certificatesOnly(text, "--ca-bundle-file");
  } catch (error) {
    if (error instanceof ApiServerEndpointError) throw new UsageError(error.message);
    throw error;
  }
  const dropped = [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----/g)].map((match) => match[1] ?? "").filter((label) => label !== "CERTIFICATE");
  return { pem, dropped };
}

/** The function's base URL, as Kubernetes accepts a webhook URL and the relay can address it. */
export function parseFunctionUrl(raw: string, mode: "url" | "relay"): { url: string; endpoint: FunctionEndpoint } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--function-url: not a URL: ${raw}`);
  }
  if (url.protocol !== "https:") throw new UsageError(`--function-url must be https (Kubernetes calls webhooks over TLS only), got ${url.protocol.replace(/:$/, "")}`);
  if (url.search !== "" || raw.includes("?"))
    throw new UsageError("--function-url must have no query string: Kubernetes forbids one in a webhook URL (so a key cannot ride in ?code=)");
  if (url.hash !== "" || raw.includes("#")) throw new UsageError("--function-url must have no fragment: Kubernetes forbids one in a webhook URL");
  if (url.username !== "" || url.password !== "") throw new UsageError("--function-url must carry no user or password");
  if (url.pathname !== "/") throw new UsageError(`--function-url is the base URL, without a path (the webhooks are its /mutate and /validate), got ${url.pathname}`);
  const host = url.hostname.toLowerCase();
  const literalIp = isIP(host.replace(/^\[|\]$/g, "")) !== 0;
  if (mode === "relay" && literalIp) throw new UsageError("--function-url: in relay mode the function is addressed by name (its TLS name and Host header)");
  if (!literalIp && !hostName.test(host)) throw new UsageError(`--function-url: ${host} is not a valid host name`);
  const port = url.port === "" ? 443 : Number(url.port);
  return { url: `https://${url.host}`, endpoint: { host, port } };
}

function integer(raw: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new UsageError(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

/** The environment the command reads: the member's secret may come from GMSA_CLUSTER_SECRET. */
export type WireEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * The fleet member of --cluster, with its secret from --cluster-secret-file or GMSA_CLUSTER_SECRET.
 * No message ever repeats the secret, not even a part of it.
 */
function fleetMember(name: string | undefined, secretFile: string | undefined, env: WireEnvironment, notices: string[]): FleetMember | undefined {
  const fromEnv = env.GMSA_CLUSTER_SECRET;
  if (name === undefined) {
    if (secretFile !== undefined) throw new UsageError("--cluster-secret-file goes with --cluster NAME (the fleet member this cluster is)");
    if (fromEnv !== undefined && fromEnv !== "")
      notices.push("GMSA_CLUSTER_SECRET is set but --cluster is not: wiring for a single-cluster Function App (today's paths, no cluster secret)\n");
    return undefined;
  }
  if (!memberNamePattern.test(name))
    throw new UsageError(`--cluster: ${JSON.stringify(name)} is not a member name (a DNS label: 1 to 63 of a-z 0-9 -, starting and ending with a letter or digit)`);
  const setting = clusterSecretSettingName(name);
  if (secretFile !== undefined && fromEnv !== undefined && fromEnv !== "") throw new UsageError("give the cluster secret once: --cluster-secret-file or GMSA_CLUSTER_SECRET");
  const secret = secretFile !== undefined ? readText(secretFile, "--cluster-secret-file").trim() : (fromEnv ?? "").trim();
  if (secret === "") throw new UsageError(`--cluster ${name} needs the member's secret (the one in the function's ${setting}): --cluster-secret-file FILE or GMSA_CLUSTER_SECRET`);
  if (secret.includes(",")) throw new UsageError(`the cluster secret is one secret: while rotating, ${setting} holds "new,old" and the wiring gets the new one alone`);
  if (!isMemberSecret(secret)) throw new UsageError(`the cluster secret must be ${memberSecretRule}; it may travel in a URL path, and the one given is not`);
  return { name, secret };
}

/**
 * What url wiring costs a fleet member, said every time it is chosen: the secret is a segment of
 * the webhook URL, and the API server (not this product) quotes that URL in what it tells pod
 * creators and writes to events whenever a call fails.
 */
export function urlWiringWarning(name: string): string {
  return [
    `warning: url wiring puts the secret of cluster "${name}" in its webhook URLs, and the API server quotes those URLs, secret included, in the error it returns to whoever creates a pod and in FailedCreate events whenever a call to the function fails (an outage, a restart, a cold start past the timeout).`,
    `  So this cluster's users who may create pods or read events can learn the secret; with it, whoever also controls another url-wired member's API server can get "${name}"'s credential spec contents.`,
    `  url wiring keeps "${name}" apart only from members whose users cannot learn the secret. For a fleet whose members do not trust each other, wire every member with --mode relay: the relay sends the secret in a header, never in a URL.`,
    `  After any outage of the function, rotate this member's secret (docs/wiring.md, "Rotating a member secret").`,
    "",
  ].join("\n");
}

export function parseWireArguments(argv: readonly string[], env: WireEnvironment = {}): WireRequest {
  let values: { [K in keyof typeof options]?: (typeof options)[K]["type"] extends "string" ? string : boolean };
  try {
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  if (values.help) return { action: "help" };

  const namespace = values.namespace ?? relayDefaultNamespace;
  if (!dnsLabel.test(namespace)) throw new UsageError(`--namespace: ${JSON.stringify(namespace)} is not a valid namespace name`);
  if (reservedNamespaces.has(namespace)) throw new UsageError(`--namespace: the relay gets a namespace of its own, not ${namespace}`);
  if (values["dry-run"] && !values.apply) throw new UsageError("--dry-run goes with --apply: without --apply nothing is applied anyway");

  const checkGiven = (["check-namespace", "check-service-account", "check-timeout-seconds"] as const).filter((name) => values[name] !== undefined);
  if (checkGiven.length > 0 && !values.check) throw new UsageError(`--${checkGiven.join(", --")} go with --check`);
  let check: ReadinessCheck | undefined;
  if (values.check) {
    const checkNamespace = values["check-namespace"] ?? "default";
    const serviceAccount = values["check-service-account"] ?? "default";
    if (!dnsLabel.test(checkNamespace)) throw new UsageError(`--check-namespace: ${JSON.stringify(checkNamespace)} is not a valid namespace name`);
    if (checkNamespace === "kube-system") throw new UsageError("--check-namespace: the webhooks never run in kube-system");
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(serviceAccount)) throw new UsageError(`--check-service-account: ${JSON.stringify(serviceAccount)} is not a valid name`);
    const timeoutSeconds = values["check-timeout-seconds"] === undefined ? 120 : integer(values["check-timeout-seconds"], "--check-timeout-seconds", 0, 600);
    check = { namespace: checkNamespace, serviceAccount, timeoutSeconds };
  }

  if (values.uninstall) {
    if (check) throw new UsageError("--check proves a wiring: it does not go with --uninstall");
    const extra = (["function-url", "mode", "identity", "function-key", "function-key-file", "cluster", "cluster-secret-file", "out", "certificate-out"] as const).filter(
      (name) => values[name] !== undefined,
    );
    if (extra.length > 0) throw new UsageError(`--uninstall takes only --namespace, --apply and --dry-run, not --${extra.join(", --")}`);
    if (!values.apply) throw new UsageError("--uninstall changes the cluster: add --apply (and --dry-run to see what it would delete)");
    return { action: "uninstall", namespace, dryRun: Boolean(values["dry-run"]) };
  }

  const mode = values.mode;
  if (check && mode === undefined && values["function-url"] === undefined && values.identity === undefined) {
    if (values.apply || values.out !== undefined) throw new UsageError("--check alone reads the cluster only: to wire and then check, give the wiring's options too");
    return { action: "check", check };
  }
  if (check && !values.apply) throw new UsageError("--check after wiring needs --apply (a rendering changes nothing to check); or give --check alone");
  if (check && values["dry-run"]) throw new UsageError("--check does not go with --dry-run: nothing would have been applied");
  if (mode === undefined) throw new UsageError("--mode is required: url (the API server reaches the function) or relay (standard AKS)");
  if (mode !== "url" && mode !== "relay") throw new UsageError(`--mode must be url or relay, got ${JSON.stringify(mode)}`);
  if (values["function-url"] === undefined) throw new UsageError("--function-url is required (https://<function app host>)");
  const { url, endpoint } = parseFunctionUrl(values["function-url"], mode);
  const identity = values.identity?.trim();
  if (!identity) throw new UsageError("--identity is required: the object ID of the function's managed identity, which the cluster role is bound to");
  if (/\s/.test(identity)) throw new UsageError(`--identity must be one name without spaces, got ${JSON.stringify(values.identity)}`);

  if (values["function-key"] !== undefined && values["function-key-file"] !== undefined) throw new UsageError("give the function key once: --function-key or --function-key-file");
  const keySource = values["function-key"] ?? (values["function-key-file"] === undefined ? undefined : readText(values["function-key-file"], "--function-key-file").trim());
  let functionKey: string | undefined;
  if (mode === "relay") {
    if (keySource === undefined || keySource === "")
      throw new UsageError("relay mode needs the function key: --function-key or --function-key-file (the relay sends it as x-functions-key)");
    if (!functionKeyPattern.test(keySource)) throw new UsageError("the function key must be 16 to 512 characters of A-Z a-z 0-9 + / = _ . - (as Azure issues them)");
    functionKey = keySource;
  } else if (keySource !== undefined) {
    throw new UsageError("url mode sends no function key (the API server cannot add headers): leave --function-key out, or use --mode relay");
  }

  let caBundle: CaBundle | undefined;
  if (values["ca-bundle-file"] !== undefined) {
    if (mode !== "url") throw new UsageError("--ca-bundle-file is for url mode; in relay mode the relay checks the function against the public CAs");
    caBundle = readCaBundle(values["ca-bundle-file"]);
  }
  if (mode === "url") {
    for (const name of ["rotate-certificate", "certificate-out", "relay-image", "relay-resolver", "relay-allow-from", "rollout-timeout-seconds", "adopt-namespace"] as const) {
      if (values[name] !== undefined) throw new UsageError(`--${name} is for relay mode`);
    }
  }
  const image = values["relay-image"] ?? relayDefaultImage;
  if (!/^[a-z0-9]([-a-z0-9._/:@]*[a-z0-9])?$/i.test(image)) throw new UsageError(`--relay-image: ${JSON.stringify(image)} is not an image reference`);
  const resolver = values["relay-resolver"] ?? relayDefaultResolver;
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(resolver)) throw new UsageError(`--relay-resolver: ${JSON.stringify(resolver)} is not a host name or address`);
  if (values["adopt-namespace"] && !values.apply) throw new UsageError("--adopt-namespace goes with --apply: it records the namespace as the wiring's own in the cluster");
  let relayAllowFrom = relayDefaultAllowFrom;
  if (values["relay-allow-from"] !== undefined) {
    try {
      relayAllowFrom = parseRelayAllowFrom(values["relay-allow-from"]);
    } catch (error) {
      if (error instanceof AllowFromError) throw new UsageError(`--relay-allow-from: ${error.message}`);
      throw error;
    }
  }
  if (values["rotate-certificate"] && !values.apply) throw new UsageError("--rotate-certificate goes with --apply (without it every rendering issues a new certificate)");
  const notices: string[] = [];
  const cluster = fleetMember(values.cluster, values["cluster-secret-file"], env, notices);
  if (cluster !== undefined && mode === "url") notices.push(urlWiringWarning(cluster.name));
  const request: WireRequest = {
    action: "install",
    mode,
    functionUrl: url,
    function: endpoint,
    identity,
    ...(functionKey === undefined ? {} : { functionKey }),
    ...(caBundle === undefined ? {} : { caBundlePem: caBundle.pem, caBundleDropped: caBundle.dropped }),
    timeoutSeconds: values["timeout-seconds"] === undefined ? defaultTimeoutSeconds : integer(values["timeout-seconds"], "--timeout-seconds", 1, 30),
    namespace,
    image,
    resolver,
    relayAllowFrom,
    ...(values.out === undefined ? {} : { outDir: values.out }),
    ...(values["certificate-out"] === undefined ? {} : { certificateOutDir: values["certificate-out"] }),
    apply: Boolean(values.apply),
    dryRun: Boolean(values["dry-run"]),
    includeCrd: !values["no-crd"],
    canary: !values["no-canary"],
    safetyNet: !values["no-safety-net"],
    audit: Boolean(values.audit),
    rotateCertificate: Boolean(values["rotate-certificate"]),
    rolloutTimeoutSeconds:
      values["rollout-timeout-seconds"] === undefined ? defaultRolloutTimeoutSeconds : integer(values["rollout-timeout-seconds"], "--rollout-timeout-seconds", 1, 3600),
    adoptNamespace: Boolean(values["adopt-namespace"]),
    authorizeRequestingUser: Boolean(values["authorize-requesting-user"]),
    ...(cluster === undefined ? {} : { cluster }),
    ...(notices.length === 0 ? {} : { notices }),
    ...(check === undefined ? {} : { check }),
  };
  // One rule for every secret the objects carry: never on stdout unless asked for by name.
  const secrets = [...(mode === "relay" ? ["the function key and the relay's TLS key"] : []), ...(cluster !== undefined ? ["the cluster secret"] : [])];
  if (secrets.length > 0 && !values.apply && values.out === undefined && !values["print-secrets"]) {
    const who = cluster !== undefined ? `--cluster ${cluster.name}` : "--mode relay";
    throw new UsageError(
      `${who}: the objects carry ${secrets.join(" and ")}, so they are not printed: write them with --out DIR (readable by their owner only) or --apply; --print-secrets prints them anyway (to pipe into kubectl apply -f -)`,
    );
  }

  return request;
}
