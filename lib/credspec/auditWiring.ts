import { isJsonObject } from "../jsonObject.js";
import { productFieldManager, renderedFieldsNotStored } from "../wiring/asRendered.js";
import { relayIngressProblem, relayName, relayPodLabels, selectsEverything } from "../wiring/relayIngress.js";
import { credSpecCrd, credSpecCrdName } from "../wiring/credSpecCrd.js";
import { safetyNetObjects } from "../wiring/safetyNet.js";
import { denyingBindingSpec, safetyNetPolicyNames } from "../wiring/safetyNetNames.js";
import { credSpecWebhook, mutateWebhook, validateWebhook, webhookConfigurationName, webhookPaths, type WebhookName } from "../wiring/webhooks.js";

/**
 * The product's own wiring as a cluster stores it, for the audit: each object as the API server
 * answered it, or undefined where it answered 404.
 */
export interface StoredWiring {
  readonly mutating: unknown;
  readonly validating: unknown;
  readonly crd: unknown;
  /** The safety net's ValidatingAdmissionPolicies and their bindings, by name. */
  readonly policies: Readonly<Record<string, unknown>>;
  readonly bindings: Readonly<Record<string, unknown>>;
  /** The Function App's own host name (WEBSITE_HOSTNAME), where a URL-wired webhook should call it. */
  readonly functionHost?: string;
  /** Objects the audit may not read (its role is older than this audit): nothing is judged then. */
  readonly unreadable?: readonly string[];
  /** In relay wiring (the webhooks call the relay's service): the NetworkPolicies of its namespace. */
  readonly relay?: { readonly namespace: string; readonly networkPolicies: readonly unknown[] };
}

/** The namespace of the relay the stored webhook configurations call, if they call one. */
export function relayNamespaceOf(configurations: readonly unknown[]): string | undefined {
  for (const configuration of configurations) {
    const webhooks = record(configuration)?.webhooks;
    for (const webhook of Array.isArray(webhooks) ? webhooks : []) {
      const service = record(record(record(webhook)?.clientConfig)?.service);
      if (service?.name === relayName && typeof service.namespace === "string") return service.namespace;
    }
  }
  return undefined;
}

export type WiringFindingKind = "wiringMissing" | "wiringChanged" | "safetyNetMissing" | "wiringUnreadable" | "wiringElsewhere";

export interface WiringFinding {
  readonly kind: WiringFindingKind;
  readonly object: string;
  readonly problem: string;
  readonly action: string;
}

const rewire = "wire the cluster again (npm run wire -- ... --apply, or the deployment's wiring), and find out who changed it";

const record = (value: unknown): Record<string, unknown> | undefined => (isJsonObject(value) ? value : undefined);

/** A selector left out, or one that selects everything: what "none rendered" allows. */
function isEmptySelector(value: unknown): boolean {
  return value === undefined || value === null || selectsEverything(value);
}

/** Where a stored webhook no longer holds what the product renders for it. */
function webhookChanges(expected: Record<string, unknown>, stored: Record<string, unknown>): string[] {
  const changes = renderedFieldsNotStored(expected, stored);
  changes.push(...selectorChanges(expected, stored, "", changes));
  if (!("matchConditions" in expected) && Array.isArray(stored.matchConditions) && stored.matchConditions.length > 0) {
    changes.push(`matchConditions: rendered none, stored ${JSON.stringify(stored.matchConditions)}`);
  }
  return changes;
}

/**
 * The selectors, which the product sets whole or leaves out: a stored one must be the rendered
 * one exactly, or empty where none was rendered. Anything added lets objects past the check.
 * `reported` holds what was already said of them, which is not said twice.
 */
function selectorChanges(rendered: Record<string, unknown> | undefined, stored: Record<string, unknown>, at: string, reported: readonly string[]): string[] {
  const changes: string[] = [];
  for (const field of ["namespaceSelector", "objectSelector"]) {
    const path = `${at}${field}`;
    const expected = rendered?.[field];
    const same = expected === undefined ? isEmptySelector(stored[field]) : JSON.stringify(stored[field]) === JSON.stringify(expected);
    if (!same && !reported.some((change) => change.startsWith(path)))
      changes.push(`${path}: rendered ${expected === undefined ? "none" : JSON.stringify(expected)}, stored ${JSON.stringify(stored[field])}`);
  }
  return changes;
}

/**
 * Whether a webhook still calls the product: the relay's service or a URL, either at the
 * webhook's own path. Which host or service namespace depends on the wiring, and is not judged
 * here (otherHost does, where the app knows its host).
 */
function targetChanges(webhookName: WebhookName, clientConfig: Record<string, unknown> | undefined): string[] {
  const path = webhookPaths[webhookName];
  const service = record(clientConfig?.service);
  if (service) {
    const changes: string[] = [];
    if (service.name !== relayName) changes.push(`clientConfig.service: calls ${JSON.stringify(service.name)}, not the relay ${JSON.stringify(relayName)}`);
    if (service.path !== path) changes.push(`clientConfig.service.path: rendered ${JSON.stringify(path)}, stored ${JSON.stringify(service.path)}`);
    return changes;
  }
  const url = typeof clientConfig?.url === "string" ? URL.parse(clientConfig.url) : null;
  if (!url) return [`clientConfig: calls neither a URL nor the relay (${JSON.stringify(clientConfig)})`];
  return url.pathname.endsWith(path) ? [] : [`clientConfig.url: rendered a URL ending in ${path}, stored ${JSON.stringify(clientConfig!.url)}`];
}

/** The host a URL-wired webhook calls, when it is not the Function App's own. */
function otherHost(clientConfig: Record<string, unknown> | undefined, functionHost: string | undefined): string | undefined {
  if (!functionHost || typeof clientConfig?.url !== "string") return undefined;
  const url = URL.parse(clientConfig.url);
  return url && url.hostname.toLowerCase() !== functionHost.toLowerCase() ? url.host : undefined;
}

/**
 * Where the stored CRD differs from the product's. A conversion webhook rewrites what is sent as
 * v1alpha1 after every check has passed, so only none will do. A CRD someone else installed (the
 * AKS add-on, the upstream chart: the wiring leaves theirs alone) is judged on what admission
 * relies on, its group, names, scope and served versions; the product's own, on all it rendered.
 */
function crdChanges(crd: Record<string, unknown>): string[] {
  const rendered = credSpecCrd();
  const spec = record(crd.spec) ?? {};
  const conversion = record(spec.conversion);
  const changes: string[] = [];
  if (conversion && conversion.strategy !== undefined && conversion.strategy !== "None") changes.push(`spec.conversion: rendered none, stored ${JSON.stringify(conversion)}`);
  if (managedBy(crd).includes(productFieldManager)) return [...renderedFieldsNotStored(rendered.spec, spec, "spec"), ...changes];
  changes.push(
    ...renderedFieldsNotStored(
      { group: rendered.spec.group, scope: rendered.spec.scope, names: { kind: rendered.spec.names.kind, plural: rendered.spec.names.plural } },
      spec,
      "spec",
    ),
  );
  const versions = Array.isArray(spec.versions) ? spec.versions.map(record) : [];
  for (const version of ["v1", "v1alpha1"])
    if (!versions.some((stored) => stored?.name === version && stored.served === true)) changes.push(`spec.versions: ${version} is not served`);
  return changes;
}

/** The field managers that wrote an object (server-side apply records each). */
function managedBy(object: Record<string, unknown>): string[] {
  const entries = record(object.metadata)?.managedFields;
  return Array.isArray(entries) ? entries.map((entry) => String(record(entry)?.manager ?? "")) : [];
}

/**
 * What a policy's or binding's match says beyond what was rendered: a selector other than the
 * rendered one (or any, where none was), or resources excluded. Rules it adds only check more.
 */
function constraintChanges(rendered: Record<string, unknown> | undefined, stored: Record<string, unknown> | undefined, at: string, reported: readonly string[]): string[] {
  if (!stored) return [];
  const changes = selectorChanges(rendered, stored, `${at}.`, reported);
  const excluded = stored.excludeResourceRules;
  if (Array.isArray(excluded) && excluded.length > 0) changes.push(`${at}.excludeResourceRules: rendered none, stored ${JSON.stringify(excluded)}`);
  if (rendered === undefined && Array.isArray(stored.resourceRules) && stored.resourceRules.length > 0)
    changes.push(`${at}.resourceRules: rendered none, stored ${JSON.stringify(stored.resourceRules)}`);
  return changes;
}

const shown = (changes: readonly string[]) => (changes.length <= 3 ? changes.join("; ") : `${changes.slice(0, 3).join("; ")}; and ${changes.length - 3} more`);

/**
 * The webhook configurations, the CRD and the safety net, against what the product renders: each
 * one missing, or changed where it decides which objects are checked and what happens when the
 * webhook cannot answer. Each webhook must still call the relay or a URL at its own path, and,
 * where the app knows its host, that host; its CA, the relay's namespace and the timeout depend
 * on how the cluster was wired, and are not judged. The safety net's policies are judged against
 * either of their renderings (with the requesting-user check or without). In relay wiring, the
 * relay's NetworkPolicies must let only the API server reach it.
 */
export function wiringFindings(stored: StoredWiring): WiringFinding[] {
  const findings: WiringFinding[] = [];
  if (stored.unreadable && stored.unreadable.length > 0) {
    return [
      {
        kind: "wiringUnreadable",
        object: stored.unreadable.join(", "),
        problem: "the audit may not read these, so the product's wiring was not checked",
        action: "give the audit its whole role again (npm run wire -- --audit --apply, or the deployment's wiring)",
      },
    ];
  }
  const configurations = [
    { kind: "MutatingWebhookConfiguration", object: stored.mutating, webhooks: [mutateWebhook()], what: "no pod's credential spec is inlined" },
    {
      kind: "ValidatingWebhookConfiguration",
      object: stored.validating,
      webhooks: [validateWebhook(), credSpecWebhook()],
      what: "no pod's use of a credential spec is checked by the webhook",
    },
  ];
  for (const configuration of configurations) {
    const name = `${configuration.kind} ${webhookConfigurationName}`;
    const object = record(configuration.object);
    if (!object) {
      findings.push({ kind: "wiringMissing", object: name, problem: `is not in the cluster: ${configuration.what}`, action: rewire });
      continue;
    }
    const webhooks = Array.isArray(object.webhooks) ? object.webhooks.map(record) : [];
    for (const expected of configuration.webhooks) {
      const webhook = webhooks.find((candidate) => candidate?.name === expected.name);
      if (!webhook) {
        findings.push({ kind: "wiringChanged", object: name, problem: `holds no webhook ${expected.name}`, action: rewire });
        continue;
      }
      const changes = [...webhookChanges(expected as unknown as Record<string, unknown>, webhook), ...targetChanges(expected.name, record(webhook.clientConfig))];
      const elsewhere = otherHost(record(webhook.clientConfig), stored.functionHost);
      if (elsewhere)
        findings.push({
          kind: "wiringElsewhere",
          object: `${name} (${expected.name})`,
          problem: `calls ${elsewhere}, not this Function App (${stored.functionHost}); if that is a proxy in front of the app, this is expected`,
          action: `if it is not, ${rewire}`,
        });
      if (changes.length > 0) findings.push({ kind: "wiringChanged", object: `${name} (${expected.name})`, problem: `is not as rendered: ${shown(changes)}`, action: rewire });
    }
  }

  if (stored.relay) {
    const problem = relayIngressProblem(stored.relay.networkPolicies, relayPodLabels);
    if (problem) {
      findings.push({
        kind: "wiringChanged",
        object: `NetworkPolicy ${stored.relay.namespace}/${relayName}`,
        problem: `the relay, which adds the function key to what it forwards, is open to more than the API server: ${problem}`,
        action: rewire,
      });
    }
  }

  const crd = record(stored.crd);
  const crdName = `CustomResourceDefinition ${credSpecCrdName}`;
  if (!crd) findings.push({ kind: "wiringMissing", object: crdName, problem: "is not in the cluster: no credential spec can be stored", action: rewire });
  else {
    const changes = crdChanges(crd);
    if (changes.length > 0) findings.push({ kind: "wiringChanged", object: crdName, problem: `is not as rendered: ${shown(changes)}`, action: rewire });
  }

  const present = safetyNetPolicyNames.filter((name) => stored.policies[name] !== undefined || stored.bindings[name] !== undefined);
  if (present.length === 0) {
    findings.push({
      kind: "safetyNetMissing",
      object: "ValidatingAdmissionPolicies gmsa-admission-*",
      problem: "the in-cluster safety net is not installed: if the webhooks are bypassed or switched to Ignore, nothing in the cluster holds the use rule",
      action: "wire the cluster with the safety net (the default; npm run wire -- ... --apply)",
    });
    return findings;
  }
  // The policies' rules differ only with the requesting-user check: either rendering will do.
  const renderings = [false, true].map((authorizeRequestingUser) => safetyNetObjects({ authorizeRequestingUser }));
  for (const name of safetyNetPolicyNames) {
    const policy = record(stored.policies[name]);
    const binding = record(stored.bindings[name]);
    const object = `ValidatingAdmissionPolicy ${name}`;
    if (!policy) findings.push({ kind: "wiringMissing", object, problem: "is not in the cluster while the rest of the safety net is", action: rewire });
    else {
      const spec = record(policy.spec) ?? {};
      const candidates = renderings.map((objects) => {
        const rendered = record(objects.find((o) => o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === name)?.spec) ?? {};
        const changes = renderedFieldsNotStored(rendered, spec, "spec");
        return [...changes, ...constraintChanges(record(rendered.matchConstraints), record(spec.matchConstraints), "spec.matchConstraints", changes)];
      });
      const fewest = candidates.reduce((a, b) => (b.length < a.length ? b : a));
      if (fewest.length > 0) findings.push({ kind: "wiringChanged", object, problem: `is not as rendered: ${shown(fewest)}`, action: rewire });
    }
    if (!binding) {
      findings.push({ kind: "wiringMissing", object: `ValidatingAdmissionPolicyBinding ${name}`, problem: "is not in the cluster: its policy refuses nothing", action: rewire });
      continue;
    }
    const spec = record(binding.spec) ?? {};
    const { validationActions, ...rest } = denyingBindingSpec(name);
    const changes = renderedFieldsNotStored(rest, spec, "spec");
    // Deny, with or without Audit or Warn beside it.
    const actions: unknown[] = Array.isArray(spec.validationActions) ? spec.validationActions : [];
    if (!validationActions.every((action) => actions.includes(action)))
      changes.push(`spec.validationActions: rendered ${JSON.stringify(validationActions)}, stored ${JSON.stringify(spec.validationActions)}`);
    changes.push(...constraintChanges(undefined, record(spec.matchResources), "spec.matchResources", changes));
    if (spec.paramRef !== undefined) changes.push(`spec.paramRef: rendered none, stored ${JSON.stringify(spec.paramRef)}`);
    if (changes.length > 0)
      findings.push({ kind: "wiringChanged", object: `ValidatingAdmissionPolicyBinding ${name}`, problem: `is not as rendered: ${shown(changes)}`, action: rewire });
  }
  return findings;
}
