import type { PodAdmission, PolicyDependencies, PolicySettings } from "../../lib/gmsa/podAdmission.js";
import type { CredSpecLookup, CredSpecSource, Principal, UseAuthorizer, UseDecision } from "../../lib/gmsa/ports.js";
import { credSpecFixtures } from "./fixtures.js";

/**
 * Fakes of the two policy ports that default to the happy path: every example credential spec
 * exists and everyone may use everything. Each test overrides what it is about, and can read
 * what was asked.
 */
export interface FakePorts extends PolicyDependencies {
  readonly lookups: string[];
  readonly reviews: Array<{ principal: Principal; namespace: string; name: string }>;
  credSpecs: CredSpecSource;
  authorizer: UseAuthorizer;
  settings: PolicySettings;
}

export function fakePorts(
  overrides: { settings?: Partial<PolicySettings>; decide?: (p: Principal, name: string) => UseDecision; lookup?: (name: string) => CredSpecLookup } = {},
): FakePorts {
  const lookups: string[] = [];
  const reviews: FakePorts["reviews"] = [];
  const defaultLookup = fixtureLookup();
  return {
    lookups,
    reviews,
    call: { signal: new AbortController().signal, namespace: "apps" },
    settings: { randomHostname: false, authorizeRequestingUser: false, maxCredSpecsPerPod: 16, maxPlacesPerPod: 64, ...overrides.settings },
    credSpecs: {
      async lookup(name) {
        lookups.push(name);
        return (overrides.lookup ?? defaultLookup)(name);
      },
    },
    authorizer: {
      async mayUse(principal, namespace, name) {
        reviews.push({ principal, namespace, name });
        return overrides.decide ? overrides.decide(principal, name) : { allowed: true };
      },
    },
  };
}

/** What the example credential specs answer: found, not found, or found without a credspec. */
export function fixtureLookup(): (name: string) => CredSpecLookup {
  const known = new Map(credSpecFixtures().map((c) => [c.metadata.name, c]));
  return (name) => {
    const object = known.get(name);
    if (!object) return { kind: "notFound" };
    return object.credspec ? { kind: "found", credspec: object.credspec } : { kind: "noCredspec" };
  };
}

export function admission(operation: PodAdmission["operation"], pod: unknown, extra: Partial<PodAdmission> = {}): PodAdmission {
  return { operation, namespace: "apps", name: "web-0", pod: pod as PodAdmission["pod"], userInfo: { username: "alice", groups: ["developers"] }, ...extra };
}
