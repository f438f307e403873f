import { suite } from "uvu";
import * as assert from "uvu/assert";
import { routeMatcher, type HttpRegistration } from "../../host/functionsHost.js";

const registration = (name: string, route: string): HttpRegistration => ({ name, route, methods: ["POST"], authLevel: "anonymous", handler: async () => ({}) });

const find = routeMatcher([
  registration("mutate", "mutate"),
  registration("cluster-mutate", "clusters/{cluster}/mutate"),
  registration("cluster-secret-mutate", "clusters/{cluster}/{secret}/mutate"),
  registration("cluster-secret-validate", "clusters/{cluster}/{secret}/validate"),
  registration("health", "health"),
]);

const Routes = suite("the local host's route templates");

const table: Array<[string, string | undefined, Record<string, string>]> = [
  ["/mutate", "mutate", {}],
  ["/mutate/", "mutate", {}],
  ["/clusters/alpha/mutate", "cluster-mutate", { cluster: "alpha" }],
  ["/clusters/alpha/s3cret/mutate", "cluster-secret-mutate", { cluster: "alpha", secret: "s3cret" }],
  // A secret that spells a webhook's name is still a secret: the segment count decides.
  ["/clusters/alpha/validate/mutate", "cluster-secret-mutate", { cluster: "alpha", secret: "validate" }],
  ["/clusters/alpha/s3cret/validate", "cluster-secret-validate", { cluster: "alpha", secret: "s3cret" }],
  ["/clusters//mutate", undefined, {}],
  ["/clusters/alpha/validate", undefined, {}],
  ["/clusters/alpha/a/b/mutate", undefined, {}],
  ["/Clusters/alpha/mutate", undefined, {}],
  ["/nothing", undefined, {}],
];

for (const [path, name, params] of table) {
  Routes(`${path} → ${name ?? "no function"}`, () => {
    const match = find(path);
    assert.is(match?.registration.name, name);
    if (match) assert.equal({ ...match.params }, params);
  });
}

Routes("a literal route is answered with the same match every time", () => {
  assert.is(find("/mutate"), find("/mutate"));
});

Routes.run();
