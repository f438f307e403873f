import type { Binding } from "./binding.js";
import type { Pod } from "./pod.js";
import type { CredSpecSource, PortCall, UseAuthorizer } from "./ports.js";

/** A pod admission as the policy sees it, decoded and checked by the envelope. */
export interface PodAdmission {
  readonly operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT";
  readonly subResource?: string;
  readonly namespace: string;
  /** The name in the request; empty on CREATE with generateName. */
  readonly name?: string;
  readonly pod: Pod;
  readonly oldPod?: Pod;
  readonly userInfo?: RequestingUser;
}

/** A pod bound to a node: the only admission of a Binding, always a CREATE. */
export interface BindingAdmission {
  readonly operation: "CREATE";
  readonly namespace: string;
  /** The pod being bound. */
  readonly name?: string;
  readonly binding: Binding;
  readonly userInfo?: RequestingUser;
}

/** What a webhook policy is handed: a pod, or a binding of one. */
export type Admission = PodAdmission | BindingAdmission;

export function isBinding(admission: Admission): admission is BindingAdmission {
  return "binding" in admission;
}

export interface RequestingUser {
  readonly username?: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

export interface PolicySettings {
  /** Give GMSA pods without spec.hostname a random NetBIOS-sized hostname. */
  readonly randomHostname: boolean;
  /** Require the requesting user, not only the pod's service account, to hold `use`. */
  readonly authorizeRequestingUser: boolean;
  /** The most distinct credential spec names one pod (or one update) may carry. */
  readonly maxCredSpecsPerPod: number;
  /** The most places (pod, containers, annotations) one pod (or one update) may set GMSA settings in. */
  readonly maxPlacesPerPod: number;
  /**
   * After a 403, or a 422 for a name that does not exist, also name the similar specs the pod's
   * principals may use. Off in the webhooks: the access reviews that find them would let a caller
   * send more reviews per pod, and learn from their cost that a spec it may not use is near its
   * guess (a grant of `use` to a name since renamed is enough to reach the 422). `credspec
   * explain`, run by an operator, turns it on.
   */
  readonly suggestAfterRefusal?: boolean;
}

export interface PolicyDependencies {
  readonly credSpecs: CredSpecSource;
  readonly authorizer: UseAuthorizer;
  readonly settings: PolicySettings;
  /** The admission's deadline and namespace, handed to every port call it makes. */
  readonly call: PortCall;
}
