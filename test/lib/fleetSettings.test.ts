import { randomBytes } from "node:crypto";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readAdmissionSettings } from "../../lib/settings/admission.js";
import { SettingsError } from "../../lib/settings/environment.js";
import { clusterSecretSettingName, readFleetSettings } from "../../lib/settings/fleet.js";

// Secrets as an operator makes them: random, URL-safe, far more than 10 different characters.
const secretA = "alpha_0123456789-abcdefghijklmnop";
const secretB = "Bravo-9876543210_ZYXWVUTSRQPONMLK";
const secretC = "charlie-0246813579_qrstuvwxyzABCD";
const secretG = "gamma_1357924680-EFGHIJKLMNOPQRST";
const resourceId = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks1";

function fleet(clusters: unknown, extra: Record<string, string> = {}): Record<string, string> {
  return { GMSA_CLUSTERS: typeof clusters === "string" ? clusters : JSON.stringify(clusters), ...extra };
}

function problemsOf(env: Record<string, string>): string[] {
  try {
    readFleetSettings(env);
  } catch (error) {
    assert.instance(error, SettingsError);
    return [...(error as SettingsError).problems];
  }
  assert.unreachable("the settings were accepted");
  return [];
}

const Single = suite("readFleetSettings without GMSA_CLUSTERS");

Single("the single-cluster settings are one member named default, with no secret", () => {
  const env = { KUBECONFIG: "/k", GMSA_API_CONCURRENCY: "3" };
  const settings = readFleetSettings(env);
  assert.is(settings.mode, "single");
  assert.equal(settings.members, [{ name: "default", settings: readAdmissionSettings(env), secrets: [] }]);
  assert.is(settings.shared.apiConcurrency, 3);
});

Single("an empty GMSA_CLUSTERS is no fleet", () => {
  assert.is(readFleetSettings({ KUBECONFIG: "/k", GMSA_CLUSTERS: "" }).mode, "single");
});

Single("the single-cluster problems are reported as before", () => {
  assert.match(problemsOf({}).join("\n"), /no cluster to talk to/);
});

Single.run();

const Fleet = suite("readFleetSettings with GMSA_CLUSTERS");

Fleet("each kind of access becomes a member, in the order given, sharing the other settings", () => {
  const settings = readFleetSettings(
    fleet(
      { alpha: { kubeconfig: "/a", context: "ctx" }, "beta-1": { aksResourceId: resourceId }, gamma: { apiServerUrl: "https://gamma-dns-4f2a.hcp.westeurope.azmk8s.io:443/" } },
      {
        GMSA_CLUSTER_SECRET_ALPHA: secretA,
        GMSA_CLUSTER_SECRET_BETA_1: `${secretB},${secretC}`,
        GMSA_CLUSTER_SECRET_GAMMA: secretG,
        GMSA_API_CONCURRENCY: "5",
        AZURE_CLIENT_ID: "client",
        KUBECONFIG: "/ignored-for-kubectl",
      },
    ),
  );
  assert.is(settings.mode, "fleet");
  assert.equal(
    settings.members.map((m) => m.name),
    ["alpha", "beta-1", "gamma"],
  );
  assert.equal(
    settings.members.map((m) => m.settings.cluster),
    [
      { access: "kubeconfig", kubeconfig: "/a", context: "ctx" },
      { access: "entra", resourceId, clientId: "client" },
      { access: "entra", server: "https://gamma-dns-4f2a.hcp.westeurope.azmk8s.io", clientId: "client" },
    ],
  );
  assert.equal(settings.members[1]!.secrets, [secretB, secretC]);
  assert.ok(settings.members.every((m) => m.settings.apiConcurrency === 5));
  assert.is(settings.idleMs, 900_000);
});

Fleet("the idle timeout is read in seconds", () => {
  assert.is(readFleetSettings(fleet({ a: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_A: secretA, GMSA_CLUSTER_IDLE_SECONDS: "60" })).idleMs, 60_000);
});

Fleet("a secret setting's name is the cluster's, upper-cased with - as _", () => {
  assert.is(clusterSecretSettingName("prod-eu-1"), "GMSA_CLUSTER_SECRET_PROD_EU_1");
});

const ok = { GMSA_CLUSTER_SECRET_ALPHA: secretA };
// Problems of the fleet as a whole: start-up stops.
const refused: Array<[string, Record<string, string>, RegExp]> = [
  ["not JSON", fleet("{alpha:"), /^GMSA_CLUSTERS is not JSON/],
  ["an array", fleet([{ kubeconfig: "/a" }]), /GMSA_CLUSTERS must be a JSON object/],
  ["no cluster", fleet({}), /GMSA_CLUSTERS names no cluster/],
  ["a name that is no DNS label", fleet({ Alpha: { kubeconfig: "/a" } }), /"Alpha" is not a cluster name/],
  ["a name with _", fleet({ al_pha: { kubeconfig: "/a" } }), /"al_pha" is not a cluster name/],
  ["a name of 64 characters", fleet({ ["a".repeat(64)]: { kubeconfig: "/a" } }), /is not a cluster name/],
  ["a cluster given twice", fleet(`{"alpha":{"kubeconfig":"/a"},"alpha":{"kubeconfig":"/b"}}`, ok), /^GMSA_CLUSTERS\.alpha is given more than once$/],
  ["a field given twice", fleet(`{"alpha":{"kubeconfig":"/a","kubeconfig":"/b"}}`, ok), /^GMSA_CLUSTERS\.alpha\.kubeconfig is given more than once$/],
  ["more than 64 clusters", fleet(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, { kubeconfig: "/a" }]))), /names 65 clusters; one app serves at most 64/],
  [
    "a single-cluster access beside the fleet",
    fleet({ alpha: { kubeconfig: "/a" } }, { ...ok, GMSA_AKS_RESOURCE_ID: resourceId }),
    /^GMSA_AKS_RESOURCE_ID names a single cluster and GMSA_CLUSTERS a fleet/,
  ],
  ["GMSA_CLUSTER_ACCESS beside the fleet", fleet({ alpha: { kubeconfig: "/a" } }, { ...ok, GMSA_CLUSTER_ACCESS: "kubeconfig" }), /^GMSA_CLUSTER_ACCESS names a single cluster/],
  [
    "an idle timeout under a minute",
    fleet({ alpha: { kubeconfig: "/a" } }, { ...ok, GMSA_CLUSTER_IDLE_SECONDS: "5" }),
    /GMSA_CLUSTER_IDLE_SECONDS must be a whole number from 60 to 86400/,
  ],
];
// Problems of one member: it is kept out of service with the reason, and the others serve.
const outOfService: Array<[string, Record<string, string>, RegExp]> = [
  ["an access that is not an object", fleet({ alpha: "/a" }, ok), /^GMSA_CLUSTERS\.alpha must be an object/],
  ["no access", fleet({ alpha: {} }, ok), /^GMSA_CLUSTERS\.alpha must give exactly one of kubeconfig, aksResourceId, apiServerUrl$/],
  ["two accesses", fleet({ alpha: { kubeconfig: "/a", aksResourceId: resourceId } }, ok), /GMSA_CLUSTERS\.alpha must give exactly one .*not kubeconfig and aksResourceId/],
  ["an unknown field", fleet({ alpha: { kubeconfig: "/a", namespace: "x" } }, ok), /^GMSA_CLUSTERS\.alpha\.namespace is not a setting \(kubeconfig takes kubeconfig, context\)$/],
  ["a field of another kind", fleet({ alpha: { apiServerUrl: "https://a.example", context: "x" } }, ok), /^GMSA_CLUSTERS\.alpha\.context does not go with apiServerUrl$/],
  ["a CA with a resource ID", fleet({ alpha: { aksResourceId: resourceId, apiServerCa: "x" } }, ok), /^GMSA_CLUSTERS\.alpha\.apiServerCa does not go with aksResourceId$/],
  ["a plain HTTP API server", fleet({ alpha: { apiServerUrl: "http://a.example" } }, ok), /^GMSA_CLUSTERS\.alpha\.apiServerUrl must be an https URL/],
  [
    "a CA that is no PEM",
    fleet({ alpha: { apiServerUrl: "https://a-dns.hcp.westeurope.azmk8s.io", apiServerCa: "bm90IGEgY2VydA==" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.apiServerCa: the CA is neither PEM/,
  ],
  [
    "an API server outside the AKS domains",
    fleet({ alpha: { apiServerUrl: "https://api.partner.example.com" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.apiServerUrl must name an AKS API server \(port 443, a host name under azmk8s\.io, .*not api\.partner\.example\.com: the managed identity's token/,
  ],
  [
    "an API server whose host only starts like an AKS one",
    fleet({ alpha: { apiServerUrl: "https://a-dns.hcp.westeurope.azmk8s.io.partner.example" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.apiServerUrl must name an AKS API server/,
  ],
  ["an AKS domain itself", fleet({ alpha: { apiServerUrl: "https://azmk8s.io" } }, ok), /^GMSA_CLUSTERS\.alpha\.apiServerUrl must name an AKS API server/],
  [
    "an API server given by a private IP address",
    fleet({ alpha: { apiServerUrl: "https://10.1.2.3" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.apiServerUrl must name an AKS API server .*not 10\.1\.2\.3/,
  ],
  [
    "an AKS API server on another port",
    fleet({ alpha: { apiServerUrl: "https://a-dns.hcp.westeurope.azmk8s.io:8443" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.apiServerUrl must name an AKS API server .*not a-dns\.hcp\.westeurope\.azmk8s\.io:8443/,
  ],
  [
    "a resource ID that is not one",
    fleet({ alpha: { aksResourceId: "/subscriptions/x" } }, ok),
    /^GMSA_CLUSTERS\.alpha\.aksResourceId: .*is not the resource ID of a managed cluster/,
  ],
  ["an empty kubeconfig", fleet({ alpha: { kubeconfig: " " } }, ok), /^GMSA_CLUSTERS\.alpha\.kubeconfig must be a non-empty string$/],
  ["a context that is not a string", fleet({ alpha: { kubeconfig: "/a", context: 3 } }, ok), /^GMSA_CLUSTERS\.alpha\.context must be a non-empty string$/],
  ["no secret", fleet({ alpha: { kubeconfig: "/a" } }), /^GMSA_CLUSTER_SECRET_ALPHA is required/],
  ["a short secret", fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: "a".repeat(31) }), /^GMSA_CLUSTER_SECRET_ALPHA must be one secret, or two/],
  [
    "a secret with characters a path cannot carry",
    fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: `${"a".repeat(32)}/x` }),
    /^GMSA_CLUSTER_SECRET_ALPHA must be/,
  ],
  ["three secrets", fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: [secretA, secretB, secretC].join(",") }), /^GMSA_CLUSTER_SECRET_ALPHA must be/],
  [
    "a secret of one repeated character",
    fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: "a".repeat(32) }),
    /^GMSA_CLUSTER_SECRET_ALPHA must be .*at least 10 of them different/,
  ],
  [
    "a secret of two alternating characters",
    fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: "ab".repeat(32) }),
    /^GMSA_CLUSTER_SECRET_ALPHA must be .*at least 10 of them different/,
  ],
  [
    "a weak old secret beside a strong new one",
    fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: `${secretA},${"0123".repeat(8)}` }),
    /^GMSA_CLUSTER_SECRET_ALPHA must be/,
  ],
  [
    "an unresolved Key Vault reference",
    fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/a)" }),
    /^GMSA_CLUSTER_SECRET_ALPHA is a Key Vault reference the platform could not resolve/,
  ],
  [
    "one secret for two members",
    fleet({ alpha: { kubeconfig: "/a" }, beta: { kubeconfig: "/b" } }, { ...ok, GMSA_CLUSTER_SECRET_BETA: `${secretB},${secretA}` }),
    /^GMSA_CLUSTER_SECRET_ALPHA and GMSA_CLUSTER_SECRET_BETA hold the same secret/,
  ],
];

for (const [what, env, expected] of refused) {
  Fleet(`refuses ${what}, naming where`, () => {
    const problems = problemsOf(env);
    assert.ok(
      problems.some((p) => expected.test(p)),
      `${expected} in ${JSON.stringify(problems)}`,
    );
  });
}

/** The reasons the settings keep members out of service, by name. */
function unavailableOf(env: Record<string, string>): Map<string, string> {
  const settings = readFleetSettings(env);
  for (const member of settings.unavailable ?? [])
    assert.not.ok(
      settings.members.some((m) => m.name === member.name),
      `${member.name} is both served and not`,
    );
  return new Map((settings.unavailable ?? []).map((m) => [m.name, m.reason]));
}

for (const [what, env, expected] of outOfService) {
  Fleet(`keeps a member with ${what} out of service, naming where, and serves the others`, () => {
    const withOther = {
      ...env,
      GMSA_CLUSTERS: JSON.stringify({ ...JSON.parse(env.GMSA_CLUSTERS!), zeta: { kubeconfig: "/z" } }),
      GMSA_CLUSTER_SECRET_ZETA: "zeta_0123456789-abcdefghijklmnopq",
    };
    const settings = readFleetSettings(withOther);
    const reasons = unavailableOf(withOther);
    assert.ok(
      [...reasons.values()].some((reason) => reason.split("; ").some((part) => expected.test(part))),
      `${expected} in ${JSON.stringify([...reasons])}`,
    );
    assert.equal(
      settings.members.map((m) => m.name),
      ["zeta"],
    );
  });
}

Fleet("two members with one AKS resource ID (whatever its case) are both kept out of service, each told of the other", () => {
  const upper = resourceId.replace("resourceGroups/rg", "resourceGroups/RG").replace("aks1", "AKS1");
  const reasons = unavailableOf(
    fleet(
      { "prod-eu": { aksResourceId: resourceId }, "prod-us": { aksResourceId: upper }, dev: { aksResourceId: resourceId.replace("aks1", "aks2") } },
      { GMSA_CLUSTER_SECRET_PROD_EU: secretA, GMSA_CLUSTER_SECRET_PROD_US: secretB, GMSA_CLUSTER_SECRET_DEV: secretC },
    ),
  );
  assert.equal([...reasons.keys()], ["prod-eu", "prod-us"]);
  for (const reason of reasons.values()) assert.match(reason, "GMSA_CLUSTERS.prod-eu and GMSA_CLUSTERS.prod-us name the same cluster (aksResourceId, compared without case)");
});

Fleet("two members with one API server URL, however it is spelt, are both kept out of service", () => {
  const spellings: Array<[string, string]> = [
    ["https://a-dns.hcp.westeurope.azmk8s.io", "https://A-DNS.hcp.WestEurope.azmk8s.io:443/"],
    ["https://a-dns.hcp.westeurope.azmk8s.io", "HTTPS://a-dns.hcp.westeurope.azmk8s.io."],
    ["https://127.0.0.1:6443", "https://127.0.0.1:6443/"],
    ["https://127.0.0.1:6443", "https://localhost:6443"],
    ["https://127.0.0.1:6443", "https://127.0.0.2:6443/api"],
    ["https://[::1]:6443", "https://LOCALHOST:6443"],
    ["https://localhost", "https://127.0.0.1:443"],
  ];
  for (const [one, other] of spellings) {
    const reasons = unavailableOf(fleet({ alpha: { apiServerUrl: one }, beta: { apiServerUrl: other } }, { ...ok, GMSA_CLUSTER_SECRET_BETA: secretB }));
    assert.equal([...reasons.keys()], ["alpha", "beta"], `${one} and ${other}`);
    assert.match(reasons.get("beta")!, "GMSA_CLUSTERS.alpha and GMSA_CLUSTERS.beta name the same cluster (apiServerUrl)");
  }
  const apart = readFleetSettings(
    fleet({ alpha: { apiServerUrl: "https://127.0.0.1:6443" }, beta: { apiServerUrl: "https://127.0.0.1:6444" } }, { ...ok, GMSA_CLUSTER_SECRET_BETA: secretB }),
  );
  assert.equal(
    apart.members.map((m) => m.name),
    ["alpha", "beta"],
    "another port is another API server",
  );
  const loopbackApart = readFleetSettings(
    fleet({ alpha: { apiServerUrl: "https://localhost:6443" }, beta: { apiServerUrl: "https://[::1]:7443" } }, { ...ok, GMSA_CLUSTER_SECRET_BETA: secretB }),
  );
  assert.equal(
    loopbackApart.members.map((m) => m.name),
    ["alpha", "beta"],
    "another loopback port is another API server",
  );
});

Fleet("a member whose secret is the problem keeps no secret; one whose access is the problem keeps its secret, to be checked first", () => {
  const settings = readFleetSettings(
    fleet(
      { alpha: { kubeconfig: "/a" }, beta: { apiServerUrl: "http://b.example" }, gamma: { kubeconfig: "/g" }, delta: { kubeconfig: "/d" } },
      {
        GMSA_CLUSTER_SECRET_ALPHA: "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/a)",
        GMSA_CLUSTER_SECRET_BETA: secretB,
        GMSA_CLUSTER_SECRET_GAMMA: secretG,
        GMSA_CLUSTER_SECRET_DELTA: `${secretC},${secretG}`,
      },
    ),
  );
  assert.equal(
    (settings.unavailable ?? []).map((m) => [m.name, m.secrets]),
    [
      ["alpha", []],
      ["beta", [secretB]],
      ["gamma", []],
      ["delta", []],
    ],
  );
  assert.equal(settings.members, []);
  const reasons = new Map((settings.unavailable ?? []).map((m) => [m.name, m.reason]));
  assert.match(reasons.get("gamma")!, "GMSA_CLUSTER_SECRET_GAMMA and GMSA_CLUSTER_SECRET_DELTA hold the same secret");
  assert.match(reasons.get("delta")!, "GMSA_CLUSTER_SECRET_GAMMA and GMSA_CLUSTER_SECRET_DELTA hold the same secret");
});

Fleet("an apiServerUrl may name an AKS API server, public or private, in any AKS cloud, or a loopback address", () => {
  const hosts = [
    "https://a-dns-1a2b.hcp.westeurope.azmk8s.io",
    "https://a-dns-1a2b.HCP.westeurope.azmk8s.io.:443",
    "https://a-1a2b.privatelink.westeurope.azmk8s.io",
    "https://a.hcp.usgovvirginia.cx.aks.containerservice.azure.us",
    "https://a.hcp.chinanorth3.cx.prod.service.azk8s.cn",
    "https://127.0.0.1:6443",
    "https://127.0.0.2:6443",
    "https://[::1]:6443",
    "https://localhost:8443",
  ];
  for (const host of hosts) {
    const settings = readFleetSettings(fleet({ alpha: { apiServerUrl: host } }, ok));
    const cluster = settings.members[0]!.settings.cluster;
    assert.is(cluster.access === "entra" ? cluster.server : undefined, new URL(host).toString().replace(/\/$/, ""), host);
  }
});

Fleet("random secrets pass the strength rule, 64 hex digits and 32 base64url characters alike", () => {
  for (let i = 0; i < 200; i++) {
    for (const value of [randomBytes(32).toString("hex"), randomBytes(24).toString("base64url")]) {
      assert.equal(readFleetSettings(fleet({ alpha: { kubeconfig: "/a" } }, { GMSA_CLUSTER_SECRET_ALPHA: value })).members[0]!.secrets, [value]);
    }
  }
});

Fleet("no problem ever quotes a secret", () => {
  const leaky = "x".repeat(20) + "/" + "y".repeat(20);
  const env = fleet(
    { alpha: { kubeconfig: "/a" }, beta: { kubeconfig: "/b" }, gamma: { kubeconfig: "/c" } },
    { GMSA_CLUSTER_SECRET_ALPHA: leaky, GMSA_CLUSTER_SECRET_BETA: `${secretA},${secretB}`, GMSA_CLUSTER_SECRET_GAMMA: secretA },
  );
  const problems = [...unavailableOf(env).values()];
  assert.is(problems.length, 3);
  assert.not.match(problems.join("\n"), "xxxxxxxx");
  assert.not.match(problems.join("\n"), secretA);
});

Fleet("every problem is reported at once", () => {
  const problems = problemsOf(fleet({ alpha: { kubeconfig: "/a" }, beta: { kubeconfig: "/b" } }, { GMSA_API_SERVER_URL: "https://x.example" }));
  assert.equal(problems.length, 3, JSON.stringify(problems));
});

Fleet.run();
