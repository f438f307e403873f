import type { AuditInput } from "../../lib/credspec/audit.js";
import { canonicalJson } from "../../lib/gmsa/canonicalJson.js";
import { credSpecFile } from "../lib/credspec/credSpecFixtures.js";

/** A cluster with one example of each finding, or none: the same objects the e2e seeds. */
export function seededCluster(clean: boolean): AuditInput {
  const good = credSpecFile("domain-joined.yaml").credspec;
  const broken = { ...credSpecFile("domain-joined.yaml").credspec, CmsPlugins: [] };
  const edited = { ...good, DomainJoinConfig: { ...good.DomainJoinConfig, Guid: "11111111-2222-3333-4444-555555555555" } };
  const role = (name: string, names: string[]) => ({
    metadata: { name, namespace: "apps" },
    rules: [{ apiGroups: ["windows.k8s.io"], resources: ["gmsacredentialspecs"], verbs: ["use"], resourceNames: names }],
  });
  const binding = (name: string, roleName: string, account: string) => ({
    metadata: { name, namespace: "apps" },
    roleRef: { kind: "Role", name: roleName },
    subjects: [{ kind: "ServiceAccount", name: account, namespace: "apps" }],
  });
  const gmsaPod = (name: string, spec: string, contents: unknown, extra: Record<string, unknown> = {}) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "apps", ...extra },
    spec: {
      serviceAccountName: "web",
      containers: [
        {
          name: "app",
          image: "mcr.microsoft.com/windows/nanoserver:ltsc2022",
          securityContext: { windowsOptions: { gmsaCredentialSpecName: spec, gmsaCredentialSpec: canonicalJson(contents) } },
        },
      ],
    },
  });
  if (clean) {
    return {
      credSpecs: [{ name: "webapp1", credspec: good }],
      rbac: { clusterRoles: [], roles: [role("use-webapp1", ["webapp1"])], clusterRoleBindings: [], roleBindings: [binding("use-webapp1", "use-webapp1", "web")] },
      pods: [
        gmsaPod("web-0", "webapp1", good),
        {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "plain", namespace: "apps" },
          spec: { containers: [{ name: "app", image: "mcr.microsoft.com/windows/nanoserver:ltsc2022" }] },
        },
      ],
    };
  }
  return {
    credSpecs: [
      { name: "webapp1", credspec: edited },
      { name: "broken", credspec: broken },
      { name: "nobody-uses", credspec: good },
    ],
    rbac: {
      clusterRoles: [],
      roles: [role("use-webapp1", ["webapp1", "webap1", "broken"]), role("use-other", ["webapp1"])],
      clusterRoleBindings: [],
      roleBindings: [binding("use-webapp1", "use-webapp1", "web")],
    },
    pods: [
      // Inlined before the spec was edited.
      gmsaPod("web-0", "webapp1", good),
      // Its spec deleted since.
      gmsaPod("gone-0", "deleted-spec", good),
      // Its account's grant taken away since.
      { ...gmsaPod("lost-0", "webapp1", edited), spec: { ...gmsaPod("lost-0", "webapp1", edited).spec, serviceAccountName: "other" } },
      // A replica whose name passes 15 characters.
      gmsaPod("webapp-7d9c8b5f6-x2x4z", "webapp1", edited, { generateName: "webapp-7d9c8b5f6-" }),
    ],
  };
}

/** What the seeded cluster gives, one finding of each kind, as `severity kind object`, sorted. */
export const seededFindings = [
  "error invalidCredSpec GMSACredentialSpec broken",
  "error podCredSpecMissing Pod apps/gone-0",
  "error podUseLost Pod apps/lost-0",
  "warning grantToMissingCredSpec Role apps/use-webapp1",
  "warning podContentsDrift Pod apps/web-0",
  "warning sharedHostname Pod apps/webapp-7d9c8b5f6-x2x4z",
  "warning unusableCredSpec GMSACredentialSpec nobody-uses",
];
