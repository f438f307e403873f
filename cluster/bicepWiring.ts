import { createHash } from "node:crypto";
import { bicepKey, placeholder, bicepValue, isRecord, mergedValue, quote } from "./bicepValues.js";
import { clusterManifests, defaultTimeoutSeconds, type KubernetesObject } from "./manifests.js";
import { memberPathPrefix, memberUrlPathPrefix } from "./fleetMember.js";
import { relayClusterSecretFile, relayClusterSecretKey, relayDefaultImage, relayDefaultNamespace, relayFunctionKeySecretName, relayName } from "./relay.js";
import { networkPolicyPeer, relayIngressRule } from "./relayNetworkPolicy.js";
import { safetyNetObjects, safetyNetPodPolicyName } from "../lib/wiring/safetyNet.js";
import { webhookClusterRole } from "./webhookRbac.js";

/**
 * The Bicep module infra/modules/cluster-wiring.bicep, generated from the same renderer as the
 * wiring command: the objects are rendered with placeholders ({{name}}) where the module takes a
 * parameter, and each placeholder becomes that parameter in the Bicep text. A test regenerates
 * the module and fails when the committed one differs. One file past 400 lines on purpose: the
 * parameter table and the conditions that place each object are the module's one description.
 */
export const bicepWiringPath = "infra/modules/cluster-wiring.bicep";

interface BicepParam {
  readonly name: string;
  readonly type: "string" | "bool" | "array";
  readonly secure?: boolean;
  readonly defaultValue?: string;
  readonly allowed?: readonly string[];
  readonly description: string;
}

const params: readonly BicepParam[] = [
  {
    name: "kubeConfig",
    type: "string",
    secure: true,
    description:
      "Admin kubeconfig of the cluster (base64), e.g. listClusterAdminCredential().kubeconfigs[0].value: the cluster must have local accounts enabled. Clusters without local accounts use the rendered YAML (npm run wire) instead.",
  },
  {
    name: "mode",
    type: "string",
    allowed: ["url", "relay"],
    description: "url: the API server calls the function directly (it can reach it). relay: an nginx relay in the cluster forwards to it (standard AKS).",
  },
  { name: "functionHost", type: "string", description: "Host name of the Function App (its default host name)." },
  { name: "identityObjectId", type: "string", description: "Object ID of the function's managed identity: the cluster role is bound to it." },
  {
    name: "installCrd",
    type: "bool",
    defaultValue: "true",
    description: "Install the GMSACredentialSpec CRD. False when the cluster already has it (the AKS gMSA add-on installs it).",
  },
  {
    name: "safetyNet",
    type: "bool",
    defaultValue: "true",
    description:
      "Install the in-cluster safety net: ValidatingAdmissionPolicies with which the API server itself holds the use rule, the freeze of GMSA settings and the shape of credential specs where the webhooks do not run (docs/security.md).",
  },
  {
    name: "audit",
    type: "bool",
    defaultValue: "false",
    description: "Let the function's identity list pods and RBAC objects, read-only, for its credential spec audit (the app's GMSA_AUDIT; docs/security.md).",
  },
  {
    name: "authorizeRequestingUser",
    type: "bool",
    defaultValue: "false",
    description:
      "The function runs with GMSA_AUTHORIZE_REQUESTING_USER=true: its cluster role may create SubjectAccessReviews too (otherwise LocalSubjectAccessReviews only, and such a function refuses every GMSA pod).",
  },
  { name: "functionKey", type: "string", secure: true, defaultValue: "''", description: "relay mode: the function key the relay sends (x-functions-key)." },
  {
    name: "clusterName",
    type: "string",
    defaultValue: "''",
    description:
      "The fleet member this cluster is (a name in the function's GMSA_CLUSTERS; a DNS label). Empty: a single-cluster Function App, on today's paths. Set: url mode calls /clusters/<name>/<clusterSecret>/..., relay mode forwards to /clusters/<name>/... with the secret in x-gmsa-cluster-secret.",
  },
  {
    name: "clusterSecret",
    type: "string",
    secure: true,
    defaultValue: "''",
    description: "With clusterName: the member's secret, one of those the function accepts in GMSA_CLUSTER_SECRET_<NAME> (32 to 128 of A-Z a-z 0-9 _ -, at least 10 different).",
  },
  { name: "relayNamespace", type: "string", defaultValue: `'${relayDefaultNamespace}'`, description: "relay mode: the relay's own namespace." },
  { name: "relayImage", type: "string", defaultValue: `'${relayDefaultImage}'`, description: "relay mode: the relay's image (nginx, unprivileged)." },
  {
    name: "relayCaCertificate",
    type: "string",
    defaultValue: "''",
    description: "relay mode: PEM of the CA of the relay's serving certificate (npm run wire -- --certificate-out DIR writes ca.crt).",
  },
  {
    name: "relayTlsCertificate",
    type: "string",
    defaultValue: "''",
    description: "relay mode: PEM of the relay's serving certificate, for <relay service>.<relayNamespace>.svc (tls.crt).",
  },
  { name: "relayTlsKey", type: "string", secure: true, defaultValue: "''", description: "relay mode: PEM of the key of the relay's serving certificate (tls.key)." },
  {
    name: "relayPreviousCaCertificate",
    type: "string",
    defaultValue: "''",
    description:
      "relay mode, while rotating the relay's certificate: PEM of the CA the relay's pods served under until now. The webhook configurations trust it besides relayCaCertificate, and are applied before the new Secret and Deployment, so pods of either certificate are trusted during the rollout. Once the rollout is done (kubectl rollout status), deploy again with this empty.",
  },
  {
    name: "relayAllowKonnectivity",
    type: "bool",
    defaultValue: "true",
    description: "relay mode: the konnectivity agents (kube-system, app: konnectivity-agent) may reach the relay: how a standard AKS API server calls into the cluster.",
  },
  {
    name: "relayAllowFromCidrs",
    type: "array",
    defaultValue: "[]",
    description: "relay mode: subnets that may reach the relay as well, as network addresses (e.g. the API server subnet with API Server VNet Integration: '10.224.0.0/28').",
  },
];

/** The relay's NetworkPolicy takes its rules from these variables, built from the two parameters above. */
function allowFromVariables(): string {
  const konnectivity = bicepValue(networkPolicyPeer({ kind: "konnectivity" }), "  ");
  const cidr = bicepValue(networkPolicyPeer({ kind: "cidr", cidr: placeholder("cidr") }), "");
  const rule = bicepValue(relayIngressRule(placeholder("relayAllowFromPeers"), "https"), "  ");
  return `// Who may reach the relay (its NetworkPolicy). No source at all admits nobody: an ingress rule
// without sources would admit everyone.
// (A for-expression may only be a declaration's value, not a function's argument.)
var relayAllowFromSubnets = [for cidr in relayAllowFromCidrs: ${cidr}]
var relayAllowFromPeers = concat(relayAllowKonnectivity ? [
  ${konnectivity}
] : [], relayAllowFromSubnets)
var relayIngress = empty(relayAllowFromPeers) ? [] : [
  ${rule}
]`;
}

/** What makes the module wire a fleet member when clusterName is set, and a single cluster when it is not. */
function fleetVariables(relayKeyData: Record<string, unknown>): string {
  const functionKeyFile = Object.keys(relayKeyData).find((key) => key !== relayClusterSecretKey) ?? "";
  const memberOnly = { [relayClusterSecretKey]: relayKeyData[relayClusterSecretKey] };
  return `// A fleet member (clusterName set): the function's paths for it, and the secret its wiring
// presents. Empty, every value below gives today's single-cluster objects exactly.
var fleet = !empty(clusterName)
var webhookPathPrefix = fleet ? ${bicepValue(memberUrlPathPrefix(memberPlaceholders), "")} : ''
var relayUpstreamPrefix = fleet ? ${bicepValue(memberPathPrefix(memberPlaceholders.name), "")} : ''
var relayClusterSecretIncludeLine = fleet ? ${quote(relayClusterSecretIncludeLine)} : ''
var relayKeyData = union(${bicepValue({ [functionKeyFile]: relayKeyData[functionKeyFile] }, "")}, fleet ? ${bicepValue(memberOnly, "")} : {})`;
}

/** The access reviews the webhook's role may create, by the authorizeRequestingUser parameter. */
function reviewResourcesVariable(): string {
  const resources = (authorizeRequestingUser: boolean) => bicepValue(reviewRule(webhookClusterRole({ authorizeRequestingUser })).resources, "");
  return `// The requesting-user check asks cluster-wide SubjectAccessReviews; without it the role does not grant them.
var webhookReviewResources = authorizeRequestingUser ? ${resources(true)} : ${resources(false)}`;
}

/** The safety net's pod policy asks the requesting user too when that check is on: its variables and rules, by the parameter. */
function safetyNetVariables(): string {
  const spec = (authorizeRequestingUser: boolean) => {
    const policy = safetyNetObjects({ authorizeRequestingUser }).find((object) => object.kind === "ValidatingAdmissionPolicy" && object.metadata.name === safetyNetPodPolicyName);
    const policySpec: unknown = policy?.spec;
    if (!isRecord(policySpec)) throw new Error("the safety net renders no pod policy");
    return policySpec;
  };
  return `// The requesting-user check is held in the cluster too: one more variable and rule when it is on.
var safetyNetVariables = authorizeRequestingUser ? ${bicepValue(spec(true).variables, "")} : ${bicepValue(spec(false).variables, "")}
var safetyNetValidations = authorizeRequestingUser ? ${bicepValue(spec(true).validations, "")} : ${bicepValue(spec(false).validations, "")}`;
}

function isReviewRule(rule: unknown): boolean {
  return isRecord(rule) && Array.isArray(rule.apiGroups) && rule.apiGroups.includes("authorization.k8s.io");
}

function reviewRule(role: { readonly rules: readonly unknown[] }): { readonly resources: unknown } {
  const rule = role.rules.find(isReviewRule);
  if (!isRecord(rule)) throw new Error("the webhook's ClusterRole has no rule for access reviews");
  return { resources: rule.resources };
}

/** The template renders the relay of a member named by the parameters; Bicep variables make that a member or none. */
const memberPlaceholders = { name: placeholder("clusterName"), secret: placeholder("clusterSecret") } as const;

/** Replaces the one piece of a member's nginx.conf that stands for the member, and fails loudly if it is not there. */
function replaceExactly(text: string, find: string, by: string, times: number): string {
  const found = text.split(find).length - 1;
  if (found !== times) throw new Error(`the relay's nginx.conf holds ${JSON.stringify(find)} ${found} times, not ${times}: the Bicep template no longer matches the renderer`);
  return text.split(find).join(by);
}

/**
 * A member's nginx.conf with what differs from a single cluster's as variables: the paths'
 * prefix, and the line that includes the secret header. Empty, they give today's file exactly.
 */
function memberConf(conf: string): string {
  const prefixed = replaceExactly(conf, `https://gmsa_function${memberPathPrefix(memberPlaceholders.name)}/`, `https://gmsa_function${placeholder("relayUpstreamPrefix")}/`, 3);
  return replaceExactly(prefixed, relayClusterSecretIncludeLine, placeholder("relayClusterSecretIncludeLine"), 1);
}

const relayClusterSecretIncludeLine = `    include ${relayClusterSecretFile};\n`;

function templateObjects(mode: "url" | "relay"): KubernetesObject[] {
  const subject = { kind: "User", name: placeholder("identityObjectId") } as const;
  const target =
    mode === "relay"
      ? ({
          kind: "relay",
          function: { host: placeholder("functionHost"), port: 443 },
          functionKey: placeholder("functionKey"),
          certificate: { caPem: placeholder("relayCaCertificate"), certPem: placeholder("relayTlsCertificate"), keyPem: placeholder("relayTlsKey") },
          namespace: placeholder("relayNamespace"),
          image: placeholder("relayImage"),
          podTemplateChecksum: placeholder("relayChecksum"),
          cluster: memberPlaceholders,
        } as const)
      : ({ kind: "url", baseUrl: `https://${placeholder("functionHost")}`, pathPrefix: placeholder("webhookPathPrefix") } as const);
  const objects = clusterManifests({
    target,
    subject,
    timeoutSeconds: defaultTimeoutSeconds,
    // Rendered, and deployed only with the `audit` parameter.
    audit: true,
    ...(mode === "relay" ? { relayCaBundlePem: placeholder("relayCaBundle") } : {}),
  });
  // The NetworkPolicy's rules, the ClusterRole's access reviews and what the relay adds to each
  // request come from parameters (allowFromVariables, reviewResourcesVariable, fleetVariables),
  // not from the template.
  return objects.map((object) => {
    if (object.kind === "ConfigMap" && isRecord(object.data)) return { ...object, data: { ...object.data, "nginx.conf": memberConf(String(object.data["nginx.conf"])) } };
    if (object.kind === "Secret" && object.metadata.name === relayFunctionKeySecretName) return { ...object, data: placeholder("relayKeyData") };
    if (object.kind === "NetworkPolicy") return { ...object, spec: { ...(isRecord(object.spec) ? object.spec : {}), ingress: placeholder("relayIngress") } };
    if (object.kind === "ValidatingAdmissionPolicy" && object.metadata.name === safetyNetPodPolicyName && isRecord(object.spec)) {
      return { ...object, spec: { ...object.spec, variables: placeholder("safetyNetVariables"), validations: placeholder("safetyNetValidations") } };
    }
    if (object.kind === "ClusterRole" && Array.isArray(object.rules)) {
      return { ...object, rules: object.rules.map((rule) => (isReviewRule(rule) && isRecord(rule) ? { ...rule, resources: placeholder("webhookReviewResources") } : rule)) };
    }
    return object;
  });
}

// ---------------------------------------------------------------------------------------
// JSON values as Bicep expressions

interface Resource {
  readonly symbol: string;
  readonly type: string;
  readonly condition: string | undefined;
  readonly fields: ReadonlyArray<readonly [string, string]>;
  readonly namespaced: boolean;
  readonly namespace?: string;
  readonly kind: string;
  readonly name: string;
}

function resourceType(object: KubernetesObject): string {
  const [group, version] = object.apiVersion.includes("/") ? object.apiVersion.split("/") : ["core", object.apiVersion];
  return `${group}/${object.kind}@${version}`;
}

/** `secretTls`, `deployment`, `mutatingWebhookConfiguration`: the kind, and the name past the product's prefix. */
function symbolFor(object: KubernetesObject, taken: Set<string>): string {
  const suffix = /^gmsa-admission(-relay|-webhook)?(.*)$/.exec(object.metadata.name)?.[2] ?? "";
  const words = [object.kind, ...suffix.split(/[^A-Za-z0-9]+/)].filter(Boolean);
  const base = words.map((word, i) => (i === 0 ? word[0]!.toLowerCase() + word.slice(1) : word[0]!.toUpperCase() + word.slice(1))).join("");
  let symbol = base;
  for (let n = 2; taken.has(symbol); n++) symbol = `${base}${n}`;
  taken.add(symbol);
  return symbol;
}

const isAudit = (object: KubernetesObject) => isRecord(object.metadata.labels) && object.metadata.labels["app.kubernetes.io/component"] === "audit";
const isSafetyNet = (object: KubernetesObject) => isRecord(object.metadata.labels) && object.metadata.labels["app.kubernetes.io/component"] === "safety-net";

const key = (object: KubernetesObject) => `${object.kind}/${object.metadata.namespace ?? ""}/${object.metadata.name}`;

/** The data of the relay's key Secret as the template renders it for a member (both files). */
function relayKeyDataTemplate(): Record<string, unknown> {
  const secret = clusterManifests({
    target: {
      kind: "relay",
      function: { host: placeholder("functionHost"), port: 443 },
      functionKey: placeholder("functionKey"),
      certificate: { caPem: "", certPem: "", keyPem: "" },
      cluster: memberPlaceholders,
    },
    subject: { kind: "User", name: "" },
  }).find((object) => object.kind === "Secret" && object.metadata.name === relayFunctionKeySecretName);
  if (secret === undefined || !isRecord(secret.data)) throw new Error("the relay renders no key Secret");
  return secret.data;
}

function resources(): { list: Resource[]; templateHash: string } {
  const url = templateObjects("url");
  const relay = templateObjects("relay");
  const urlByKey = new Map(url.map((object) => [key(object), object]));
  const taken = new Set<string>([
    ...params.map((p) => p.name),
    "relay",
    "relayChecksum",
    "relayCaBundle",
    "relayAllowFromSubnets",
    "relayAllowFromPeers",
    "relayIngress",
    "cidr",
    "webhookReviewResources",
    "safetyNetVariables",
    "safetyNetValidations",
    "fleet",
    "webhookPathPrefix",
    "relayUpstreamPrefix",
    "relayClusterSecretIncludeLine",
    "relayKeyData",
  ]);
  const list = relay.map((object): Resource => {
    const inUrl = urlByKey.get(key(object));
    const fields = Object.keys(object)
      .filter((field) => field !== "apiVersion" && field !== "kind")
      .map((field): [string, string] => [field, inUrl === undefined ? bicepValue(object[field], "  ") : mergedValue(object[field], inUrl[field], "  ")]);
    return {
      symbol: symbolFor(object, taken),
      type: resourceType(object),
      condition:
        object.kind === "CustomResourceDefinition" ? "installCrd" : isSafetyNet(object) ? "safetyNet" : isAudit(object) ? "audit" : inUrl === undefined ? "relay" : undefined,
      fields,
      namespaced: object.metadata.namespace !== undefined,
      ...(object.metadata.namespace === undefined ? {} : { namespace: object.metadata.namespace }),
      kind: object.kind,
      name: object.metadata.name,
    };
  });
  const templateHash = createHash("sha256")
    .update(JSON.stringify([url, relay]))
    .digest("hex")
    .slice(0, 16);
  return { list, templateHash };
}

function paramDeclaration(param: BicepParam): string {
  const lines: string[] = [];
  if (param.secure) lines.push("@secure()");
  if (param.allowed) lines.push(`@allowed([\n${param.allowed.map((v) => `  '${v}'`).join("\n")}\n])`);
  lines.push(`@description(${quote(param.description)})`);
  lines.push(`param ${param.name} ${param.type}${param.defaultValue === undefined ? "" : ` = ${param.defaultValue}`}`);
  return lines.join("\n");
}

/** The whole module, byte for byte as committed. */
export function renderBicepWiring(): string {
  const { list, templateHash } = resources();
  const webhookKinds = new Set(["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]);
  // What the relay serves with comes after the webhook configurations: during a rotation they
  // must trust the new CA before any pod can serve the new certificate, and the pods must start
  // from the new Secret.
  const isServing = (r: Resource) => (r.kind === "Secret" && r.name === `${relayName}-tls`) || r.kind === "Deployment";
  const webhooks = list.filter((r) => webhookKinds.has(r.kind)).map((r) => r.symbol);
  const beforeWebhooks = list.filter((r) => !webhookKinds.has(r.kind) && !isServing(r)).map((r) => r.symbol);
  const tlsSecret = list.find((r) => r.kind === "Secret" && r.name === `${relayName}-tls`);
  const blocks = list.map((resource) => {
    // A namespaced object waits for its own namespace (the relay's, or the canary's), by name.
    const namespace = resource.namespaced ? list.find((r) => r.kind === "Namespace" && r.name === resource.namespace) : undefined;
    const inNamespace = namespace ? [namespace.symbol] : [];
    const dependsOn = webhookKinds.has(resource.kind)
      ? beforeWebhooks
      : isServing(resource)
        ? [...inNamespace, ...(resource.kind === "Deployment" && tlsSecret ? [tlsSecret.symbol] : []), ...webhooks]
        : inNamespace;
    const body = [
      ...resource.fields.map(([field, value]) => `  ${bicepKey(field)}: ${value}`),
      ...(dependsOn.length === 0 ? [] : [`  dependsOn: [\n${dependsOn.map((s) => `    ${s}`).join("\n")}\n  ]`]),
    ];
    return `resource ${resource.symbol} '${resource.type}' = ${resource.condition ? `if (${resource.condition}) ` : ""}{\n${body.join("\n")}\n}`;
  });
  return `// GENERATED by scripts/render-bicep-wiring.ts from the wiring renderer in cluster/: do not edit.
// What gmsa-admission installs in a cluster (the CRD, the RBAC for the function's identity, the
// webhook configurations and, in relay mode, the relay), deployed with the Bicep Kubernetes
// extension. The extension needs an admin kubeconfig: the cluster must have local accounts
// enabled, and the extension does not support private clusters. Otherwise render the same
// objects as YAML with \`npm run wire\` (docs/wiring.md).
// In relay mode the webhook configurations are applied before the relay's TLS Secret and
// Deployment (a rotation must trust the new CA before any pod serves it): on a first install, GMSA
// pods are refused (fail closed) until the relay's pods are ready; other pods never wait on it.

${params.map(paramDeclaration).join("\n\n")}

var relay = mode == 'relay'

// A new certificate, key, member secret, function or template restarts the relay's pods (nginx reads them at start).
var relayChecksum = uniqueString('${templateHash}', functionHost, functionKey, relayCaCertificate, relayTlsCertificate, relayTlsKey, clusterName, clusterSecret)

// What the webhook configurations trust: the relay's CA, and during a rotation the previous one.
var relayCaBundle = empty(relayPreviousCaCertificate) ? relayCaCertificate : '\${relayCaCertificate}\\n\${relayPreviousCaCertificate}'
${allowFromVariables()}

${reviewResourcesVariable()}

${safetyNetVariables()}

${fleetVariables(relayKeyDataTemplate())}

extension kubernetes with {
  namespace: relayNamespace
  kubeConfig: kubeConfig
}

${blocks.join("\n\n")}
`;
}
