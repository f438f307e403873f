/**
 * The GMSACredentialSpec CRD: cluster-scoped, `v1` stored, `v1alpha1` still served for old
 * manifests. `credspec` is optional in the schema so that a broken object can exist and be
 * refused at admission with a clear message rather than at apply time.
 */
const stringProperty = { type: "string" };

/**
 * Every object of the credential spec keeps the keys its schema does not name: a key in the wrong
 * case (`SID`) or one a newer Windows reads must reach the credential spec webhook, which reads it
 * as meant and warns, instead of being pruned by the API server before anyone sees it.
 */
function openObject(properties: Record<string, unknown>) {
  return { type: "object", properties, "x-kubernetes-preserve-unknown-fields": true };
}

const credspecSchema = {
  description: "The Windows credential spec handed to the container runtime; it holds no password.",
  ...openObject({
    CmsPlugins: { type: "array", items: stringProperty },
    DomainJoinConfig: openObject({
      DnsName: stringProperty,
      DnsTreeName: stringProperty,
      Guid: stringProperty,
      MachineAccountName: stringProperty,
      NetBiosName: stringProperty,
      Sid: stringProperty,
    }),
    ActiveDirectoryConfig: openObject({
      GroupManagedServiceAccounts: { type: "array", items: openObject({ Name: stringProperty, Scope: stringProperty }) },
      HostAccountConfig: openObject({ PluginGUID: stringProperty, PluginInput: stringProperty, PortableCcgVersion: stringProperty }),
    }),
  }),
};

function version(name: string, storage: boolean) {
  return {
    name,
    served: true,
    storage,
    ...(storage ? {} : { deprecated: true, deprecationWarning: "windows.k8s.io/v1alpha1 GMSACredentialSpec is deprecated; use windows.k8s.io/v1" }),
    schema: {
      openAPIV3Schema: {
        type: "object",
        properties: {
          apiVersion: stringProperty,
          kind: stringProperty,
          metadata: { type: "object" },
          credspec: credspecSchema,
        },
      },
    },
  };
}

export const credSpecCrdName = "gmsacredentialspecs.windows.k8s.io";

export function credSpecCrd() {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: credSpecCrdName,
      // windows.k8s.io is a protected group: the API server wants the design that approved it.
      annotations: { "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/tree/master/keps/sig-windows/689-windows-gmsa" },
    },
    spec: {
      group: "windows.k8s.io",
      scope: "Cluster",
      names: { kind: "GMSACredentialSpec", listKind: "GMSACredentialSpecList", plural: "gmsacredentialspecs", singular: "gmsacredentialspec" },
      versions: [version("v1", true), version("v1alpha1", false)],
    },
  };
}
