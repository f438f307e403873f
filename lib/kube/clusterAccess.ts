/**
 * What the Kubernetes access code needs to be told: how one cluster's API server is reached, and
 * how calls to it are bounded and cached. The settings module (lib/settings) decodes these from
 * the environment; this module declares them, so that lib/kube depends on no settings code.
 */

/** How one cluster's API server is reached. */
export type ClusterAccessSettings =
  | {
      readonly access: "kubeconfig";
      readonly kubeconfig: string;
      /** The kubeconfig context to use instead of its current one (fleet members only). */
      readonly context?: string;
    }
  | { readonly access: "in-cluster" }
  | {
      readonly access: "entra";
      /** The AKS cluster's resource ID: its URL and CA come from ARM. */
      readonly resourceId?: string;
      /** Or the API server's URL (and CA) directly. */
      readonly server?: string;
      readonly caPem?: string;
      readonly armEndpoint?: string;
      /** The user-assigned managed identity to sign in with. */
      readonly clientId?: string;
    };

/** How one cluster's ports call its API server and cache its answers. */
export interface ClusterClientSettings {
  readonly apiTimeoutMs: number;
  readonly admissionBudgetMs: number;
  /** How long a `use` answer is reused; 0 asks every time. */
  readonly authCacheTtlMs: number;
  /** Keep every credential spec in memory with a list+watch instead of a GET per admission. */
  readonly credSpecCache: boolean;
  /** The most calls one instance has in flight towards the API server; the rest wait their turn. */
  readonly apiConcurrency: number;
  /** How many requests one instance serves at once: one cluster's admissions that wait on its API server may hold only its memberShare of them. */
  readonly instanceConcurrency: number;
  /** The most admissions that may wait for one of a cluster's API slots; past it one that needs a call is refused at once. */
  readonly apiMaxWaiting: number;
  /** The most credential specs, and bytes of them as JSON, one cluster's cache may hold; past either it stops and lookups read the API server. */
  readonly credSpecCacheMaxSpecs: number;
  readonly credSpecCacheMaxBytes: number;
  readonly cluster: ClusterAccessSettings;
}
