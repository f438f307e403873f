// The layers of docs/architecture.md, checked on every `npm test` (test/guards/layers.test.ts).
// Parsed with swc so that type-only imports count too: a type imported from a layer above is a
// dependency on it all the same.
const policy = "^lib/(gmsa|credspec)/";
module.exports = {
  forbidden: [
    { name: "no-circular", comment: "No import cycle, type imports included.", severity: "error", from: {}, to: { circular: true } },
    {
      name: "policy-is-pure",
      comment: "The policies (lib/gmsa, lib/credspec) judge objects over their ports: nothing of HTTP, Azure, Kubernetes clients, settings, the envelope or the adapters.",
      severity: "error",
      from: { path: policy },
      to: {
        path: [
          "^lib/(admission|kube|fleet|app|settings|caching|observability)",
          "^(functions|host|cluster|controlplane|scripts)/",
          "(^|/)node_modules/(@azure|@kubernetes|undici)/",
        ],
        pathNot: [],
      },
    },
    {
      name: "policy-imports-no-network",
      severity: "error",
      from: { path: policy },
      to: { dependencyTypes: ["core"], path: "^(node:)?(http|https|http2|net|tls|dns|child_process)$" },
    },
    {
      name: "envelope-knows-no-objects",
      comment: "The AdmissionReview envelope (lib/admission) knows nothing of pods, bindings or credential specs: the policies decode their own objects.",
      severity: "error",
      from: { path: "^lib/admission/" },
      to: { path: ["^lib/(gmsa|credspec|kube|fleet|app|settings)", "(^|/)node_modules/(@azure|@kubernetes|undici)/"] },
    },
    {
      name: "kube-declares-its-settings",
      comment: "lib/kube declares the settings it needs; the settings module builds them, not the other way round.",
      severity: "error",
      from: { path: "^lib/(kube|caching|observability|fleet)/" },
      to: { path: "^lib/(settings|app)" },
    },
    {
      name: "lib-never-imports-adapters",
      comment: "lib is the product's core: it never imports the Functions adapter, the local host, the wiring, the control plane or the scripts.",
      severity: "error",
      from: { path: "^lib/" },
      to: { path: "^(functions|host|cluster|controlplane|scripts|bench|test)/" },
    },
    {
      name: "adapters-are-siblings",
      comment: "The Functions adapter and the local host serve the same core (lib/app) and never import each other.",
      severity: "error",
      from: { path: "^functions/" },
      to: { path: "^(host|cluster|scripts|bench|test)/" },
    },
    {
      name: "host-serves-the-core",
      severity: "error",
      from: { path: "^host/" },
      to: { path: "^(functions|scripts|bench|test)/" },
    },
    {
      name: "wiring-is-no-adapter",
      comment: "The wiring and credential spec CLIs (cluster/) render and apply objects; they do not reach into either host.",
      severity: "error",
      from: { path: "^cluster/" },
      to: { path: "^(functions|host|scripts|bench|test)/" },
    },
  ],
  options: {
    parser: "swc",
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    // Packages stay in the graph (not followed): the rules above name some of them.
    exclude: { path: "^dist/" },
  },
};
