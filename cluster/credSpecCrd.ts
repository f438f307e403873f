/**
 * The GMSACredentialSpec CRD: cluster-scoped, `v1` stored, `v1alpha1` still served for old
 * manifests. `credspec` is optional in the schema so that a broken object can exist and be
 * refused at admission with a clear message rather than at apply time.
 */
const stringProperty = { type: "string" };

const credspecSchema = {
  type: "object",
  description: "The Windows credential spec handed to the container runtime; it holds no password.",
  properties: {
    CmsPlugins: { type: "array", items: stringProperty },
    DomainJoinConfig: {
      type: "object",
      properties: {
        DnsName: stringProperty,
        DnsTreeName: stringProperty,
        Guid: stringProperty,
        MachineAccountName: stringProperty,
        NetBiosName: stringProperty,
        Sid: stringProperty,
      },
    },
    ActiveDirectoryConfig: {
      type: "object",
      properties: {
        GroupManagedServiceAccounts: {
          type: "array",
          items: { type: "object", properties: { Name: stringProperty, Scope: stringProperty } },
        },
        HostAccountConfig: {
          type: "object",
          properties: { PluginGUID: stringProperty, PluginInput: stringProperty, PortableCcgVersion: stringProperty },
        },
      },
    },
  },
  "x-kubernetes-preserve-unknown-fields": true,
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
