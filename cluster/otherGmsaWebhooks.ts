/**
 * Another webhook that already handles pods' gMSA settings: the AKS gMSA add-on, the windows-gmsa
 * Helm chart, or the upstream webhook installed by hand. Told apart by what installed its
 * configuration, so that `wire` can say exactly how to remove it once this product is in place
 * (docs/migrating.md has the order and why).
 */
export type OtherGmsaWebhookOrigin = { readonly kind: "aksAddon" } | { readonly kind: "helm"; readonly release: string; readonly namespace: string } | { readonly kind: "manual" };

export interface OtherGmsaWebhook {
  /** The MutatingWebhookConfiguration's name. */
  readonly configuration: string;
  /** Its webhook that mutates gMSA pods. */
  readonly webhook: string;
  readonly origin: OtherGmsaWebhookOrigin;
}

export interface WebhookConfigurationFacts {
  readonly name: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  /** The namespaces of the services its webhooks call. */
  readonly serviceNamespaces: readonly string[];
}

export function originOf(configuration: WebhookConfigurationFacts): OtherGmsaWebhookOrigin {
  const release = configuration.annotations?.["meta.helm.sh/release-name"];
  const releaseNamespace = configuration.annotations?.["meta.helm.sh/release-namespace"];
  if (release && releaseNamespace) return { kind: "helm", release, namespace: releaseNamespace };
  // The add-on runs its webhook in kube-system, and AKS marks what its add-ons manage.
  const labels = Object.entries(configuration.labels ?? {});
  const aksManaged = labels.some(([key, value]) => key.startsWith("kubernetes.azure.com/") || (key === "addonmanager.kubernetes.io/mode" && value !== ""));
  if (aksManaged || configuration.serviceNamespaces.includes("kube-system")) return { kind: "aksAddon" };
  return { kind: "manual" };
}

/** The command that removes the other webhook, as exactly as what was found allows. */
export function removalCommand(other: OtherGmsaWebhook): string {
  switch (other.origin.kind) {
    case "aksAddon":
      return "az aks update --resource-group <resource group> --name <cluster> --disable-windows-gmsa";
    case "helm":
      return `helm uninstall ${other.origin.release} --namespace ${other.origin.namespace}`;
    case "manual":
      return `kubectl delete mutatingwebhookconfiguration ${other.configuration} && kubectl delete validatingwebhookconfiguration ${other.configuration} --ignore-not-found`;
  }
}

/** What `wire` says about it: both now check every GMSA pod, and how to remove the other once this wiring is proved. */
export function otherWebhookNotice(other: OtherGmsaWebhook): string {
  const what =
    other.origin.kind === "aksAddon"
      ? "the AKS gMSA add-on"
      : other.origin.kind === "helm"
        ? `the windows-gmsa Helm release ${other.origin.namespace}/${other.origin.release}`
        : "another gMSA webhook";
  return (
    `notice: ${what} (${other.configuration}/${other.webhook}) also handles pods' gMSA settings. With both in place every GMSA pod ` +
    `is checked by both, and both inline the same contents; once this wiring's readiness check passes (npm run wire -- --check), back up ` +
    `the credential specs (kubectl get gmsacredentialspecs -o yaml > gmsacredentialspecs.yaml) and remove the other: ${removalCommand(other)} ` +
    "(docs/migrating.md: the order, the CRD, and rolling back)\n"
  );
}
