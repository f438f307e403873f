import { isLeft } from "fp-ts/Either";
import { jsonEqual } from "../gmsa/canonicalJson.js";
import { tooLargeReason } from "../gmsa/credSpecSize.js";
import { sharedHostnameWarning } from "../gmsa/hostnameWarning.js";
import { decodePodObject, gmsaSettings } from "../gmsa/pod.js";
import { checkCredSpec } from "./checkCredSpec.js";
import { describeFinding } from "./credSpecFindings.js";
import { wiringFindings, type StoredWiring, type WiringFindingKind } from "./auditWiring.js";
import { whoMayUse, type RbacObjects, type UseGrantFound } from "./rbacUse.js";

/**
 * The credential spec health of one cluster, from what its API server holds: what will fail on a
 * node before a pod finds out. One source of rules for the command line and anything else that
 * audits; it reads a snapshot and asks nothing itself.
 */
export type Severity = "error" | "warning";

export type FindingKind =
  /** A spec the credential spec webhook would refuse (made before it existed, or while it was off). */
  | "invalidCredSpec"
  /** Legal, but almost certainly a mistake: the webhook's warnings. */
  | "suspiciousCredSpec"
  /** No binding lets a service account `use` the spec (a pod runs as one). */
  | "unusableCredSpec"
  /** A role grants `use` on a name no spec has: a typo, or a spec renamed since. */
  | "grantToMissingCredSpec"
  /** A running pod names a spec that no longer exists: the next pod of its workload is refused. */
  | "podCredSpecMissing"
  /** A running pod's inlined contents are not the spec's any more: the next pod gets other contents. */
  | "podContentsDrift"
  /** A running pod's service account may no longer `use` its spec: the next pod is refused. */
  | "podUseLost"
  /** Pods of one workload would present one NetBIOS name (a hostname past 15 characters). */
  | "sharedHostname"
  /** The product's own wiring (webhook configurations, CRD, safety net) absent, or changed from what it renders. */
  | WiringFindingKind;

export interface AuditFinding {
  readonly kind: FindingKind;
  readonly severity: Severity;
  /** The object it is about: `GMSACredentialSpec webapp1`, `Pod apps/web-0`, `ClusterRole use-all`. */
  readonly object: string;
  readonly problem: string;
  readonly action: string;
}

export interface StoredCredSpec {
  readonly name: string;
  readonly credspec: unknown;
  /** Larger than admission reads (maxCredSpecObjectBytes): its contents were not kept. */
  readonly tooLarge?: boolean;
}

export interface AuditInput {
  readonly credSpecs: readonly StoredCredSpec[];
  readonly rbac: RbacObjects;
  /** Pods as the API server lists them; those without GMSA settings are passed over. */
  readonly pods: readonly unknown[];
  /** The random-hostname setting is on: pods get a hostname that fits. */
  readonly randomHostname?: boolean;
  /** The product's own wiring as stored; not judged when not given. */
  readonly wiring?: StoredWiring;
}

const severityOf: Record<FindingKind, Severity> = {
  invalidCredSpec: "error",
  suspiciousCredSpec: "warning",
  unusableCredSpec: "warning",
  grantToMissingCredSpec: "warning",
  podCredSpecMissing: "error",
  podContentsDrift: "warning",
  podUseLost: "error",
  sharedHostname: "warning",
  wiringMissing: "error",
  wiringChanged: "error",
  safetyNetMissing: "warning",
  wiringUnreadable: "warning",
  wiringElsewhere: "warning",
};

export function auditCluster(input: AuditInput): AuditFinding[] {
  const findings: AuditFinding[] = [];
  const add = (kind: FindingKind, object: string, problem: string, action: string) => findings.push({ kind, severity: severityOf[kind], object, problem, action });
  const specs = new Map(input.credSpecs.map((spec) => [spec.name, spec.credspec]));
  const tooLarge = new Set(input.credSpecs.filter((spec) => spec.tooLarge === true).map((spec) => spec.name));

  for (const spec of input.credSpecs) {
    const object = `GMSACredentialSpec ${spec.name}`;
    if (tooLarge.has(spec.name)) {
      add(
        "invalidCredSpec",
        object,
        `${tooLargeReason}: the webhooks do not read it and refuse every pod naming it`,
        "delete it and create it again as the Windows credential spec alone (npm run credspec -- lint)",
      );
      continue;
    }
    const report = checkCredSpec(spec.credspec);
    if (report.errors.length > 0)
      add("invalidCredSpec", object, report.errors.map(describeFinding).join("; "), "correct it (npm run credspec -- lint) or delete it: no pod can run with it");
    if (report.warnings.length > 0)
      add("suspiciousCredSpec", object, report.warnings.map(describeFinding).join("; "), "check it against Active Directory (npm run credspec -- lint)");
    if (!whoMayUse(input.rbac, spec.name).some(reachesServiceAccounts)) {
      add(
        "unusableCredSpec",
        object,
        "no RoleBinding or ClusterRoleBinding lets a service account use it",
        `grant it (npm run credspec -- grant ${spec.name} --service-account NAMESPACE/NAME --apply) or delete it`,
      );
    }
  }

  for (const role of [...input.rbac.clusterRoles.map((r) => ({ r, kind: "ClusterRole" })), ...input.rbac.roles.map((r) => ({ r, kind: "Role" }))]) {
    const named = new Set((role.r.rules ?? []).filter((rule) => grantsUse(rule)).flatMap((rule) => rule.resourceNames ?? []));
    for (const name of [...named].filter((n) => !specs.has(n)).sort()) {
      const object = `${role.kind} ${role.r.metadata.namespace ? `${role.r.metadata.namespace}/` : ""}${role.r.metadata.name}`;
      add(
        "grantToMissingCredSpec",
        object,
        `grants use of GMSACredentialSpec "${name}", which does not exist`,
        "correct the name (a typo, or a spec renamed since) or remove it from the role",
      );
    }
  }

  for (const raw of input.pods) {
    const decoded = decodePodObject(raw);
    if (isLeft(decoded)) continue;
    const pod = decoded.right;
    const namespace = pod.metadata?.namespace ?? "";
    const object = `Pod ${namespace}/${pod.metadata?.name ?? ""}`;
    const settings = gmsaSettings(pod, pod.metadata?.name ?? undefined).filter((s) => s.name !== undefined);
    if (settings.length === 0) continue;
    const names = [...new Set(settings.map((s) => s.name!))];
    for (const name of names) {
      // Said of the spec itself above; its contents were not kept to compare.
      if (tooLarge.has(name)) continue;
      const current = specs.get(name);
      if (current === undefined) {
        add(
          "podCredSpecMissing",
          object,
          `names GMSACredentialSpec "${name}", which no longer exists`,
          `create it again, or change the workload's spec name: its next pod is refused`,
        );
        continue;
      }
      const drifted = settings.filter((s) => s.name === name && s.contents !== undefined && !sameContents(s.contents, current));
      if (drifted.length > 0) {
        add(
          "podContentsDrift",
          object,
          `runs with contents of GMSACredentialSpec "${name}" that are not the spec's now`,
          "restart the workload's pods when the change is meant: each new pod gets the spec as it is",
        );
      }
    }
    const account = pod.spec?.serviceAccountName || pod.spec?.serviceAccount || "default";
    const lost = names.filter((name) => specs.has(name) && !mayUse(input.rbac, name, namespace, account));
    if (lost.length > 0) {
      add(
        "podUseLost",
        object,
        `its service account ${namespace}/${account} may no longer use ${lost.map((n) => `"${n}"`).join(", ")} (by RBAC)`,
        `grant it again (npm run credspec -- grant ${lost[0]} --service-account ${namespace}/${account} --apply), or the workload's next pod is refused`,
      );
    }
    if (!input.randomHostname) {
      const shared = sharedHostnameWarning(pod, `pod "${pod.metadata?.name ?? ""}"`, names);
      if (shared) add("sharedHostname", object, shared, "set spec.hostname per pod to at most 15 characters, or turn on GMSA_RANDOM_HOSTNAME");
    }
  }
  if (input.wiring) for (const finding of wiringFindings(input.wiring)) add(finding.kind, finding.object, finding.problem, finding.action);
  return findings;
}

/** A grant some service account holds: to one, to a service account user name, or to a group service accounts are in. */
function reachesServiceAccounts(grant: UseGrantFound): boolean {
  const { kind, name } = grant.subject;
  return (
    kind === "ServiceAccount" ||
    (kind === "User" && name.startsWith("system:serviceaccount:")) ||
    (kind === "Group" && (name === "system:serviceaccounts" || name.startsWith("system:serviceaccounts:") || name === "system:authenticated"))
  );
}

function grantsUse(rule: { readonly verbs: readonly string[]; readonly apiGroups?: readonly string[] | undefined; readonly resources?: readonly string[] | undefined }): boolean {
  const has = (values: readonly string[] | undefined, wanted: string) => values !== undefined && (values.includes("*") || values.includes(wanted));
  return has(rule.verbs, "use") && has(rule.apiGroups, "windows.k8s.io") && has(rule.resources, "gmsacredentialspecs");
}

function sameContents(contents: string, credspec: unknown): boolean {
  try {
    return jsonEqual(JSON.parse(contents), credspec);
  } catch {
    return false;
  }
}

/** Whether RBAC lets the service account `use` the spec in its namespace: itself, or a group it is in. */
function mayUse(rbac: RbacObjects, name: string, namespace: string, account: string): boolean {
  const groups = new Set(["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"]);
  const holds = (grant: UseGrantFound) =>
    (grant.subject.kind === "ServiceAccount" && grant.subject.name === account && (grant.subject.namespace ?? grant.namespace) === namespace) ||
    (grant.subject.kind === "User" && grant.subject.name === `system:serviceaccount:${namespace}:${account}`) ||
    (grant.subject.kind === "Group" && groups.has(grant.subject.name));
  // With a namespace: its RoleBindings and every ClusterRoleBinding.
  return whoMayUse(rbac, name, namespace).some(holds);
}
