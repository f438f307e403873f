import * as clientNode from "@kubernetes/client-node";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";

/**
 * A guard against fields lost in client-node's typed serializer (kubernetes-client/javascript
 * issue 2825): it writes and reads model property names, so a wire field whose model name
 * differs (`from` is `_from`) is dropped without an error. Product code sends and reads
 * manifests as wire JSON (cluster/kubeObjects.ts); from client-node it takes only the kubeconfig
 * and the few typed calls whose models name every field as the wire does, which this suite checks.
 */
const root = join(__dirname, "..", "..");
const productFolders = ["functions", "lib", "host", "cluster", "controlplane", "scripts"];

/** What product code may take from client-node, and why each is safe. */
const allowedImports: Readonly<Record<string, string>> = {
  KubeConfig: "kubeconfig loading, credentials and TLS",
  Cluster: "a kubeconfig's cluster (type)",
  User: "a kubeconfig's user (type)",
  ApiException: "errors of the typed calls below",
  ConfigurationOptions: "per-call options of the typed calls below",
  Observable: "per-call middleware of the typed calls below",
  ObservableMiddleware: "per-call middleware of the typed calls below",
  CustomObjectsApi: "custom objects are untyped there: the serializer passes them through as they are",
  makeInformer: "the credential spec watch, listed through CustomObjectsApi",
  KubernetesListObject: "the informer's list (type)",
  KubernetesObject: "the informer's objects (type)",
  AuthorizationV1Api: "access reviews: every model they use names its fields as the wire does (checked below)",
  V1ResourceAttributes: "an access review's attributes (type; checked below)",
};

/** The serializer's entry points for manifests; no product file names them. */
const forbiddenNames = ["KubernetesObjectApi", "ObjectSerializer", "PatchStrategy"];

/**
 * Source files that can talk to a cluster. In scripts/ that is the commands (TypeScript); its
 * JavaScript files are the package build's esbuild plugins, which read client-node's own modules
 * to build the package and send nothing anywhere.
 */
function productFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return productFiles(path);
    const code = relative(root, dir).startsWith("scripts") ? /\.ts$/ : /\.(ts|js|mjs|cjs)$/;
    return code.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The names one file takes from client-node, or "*" for a namespace import or require. */
export function clientNodeImports(source: string): string[] {
  const names: string[] = [];
  const named = /import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*["']@kubernetes\/client-node[^"']*["']/g;
  for (const match of source.matchAll(named)) {
    for (const part of (match[1] ?? "").split(",")) {
      const name = part
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)[0]
        ?.trim();
      if (name) names.push(name);
    }
  }
  const whole = /import\s+(?:type\s+)?(?:\*\s+as\s+\w+|\w+)\s+from\s*["']@kubernetes\/client-node|(?:require|import)\(\s*["']@kubernetes\/client-node/g;
  for (const _ of source.matchAll(whole)) names.push("*");
  return names;
}

const Guard = suite("product code never sends a manifest through client-node's typed serializer");

Guard("the import scanner sees named, renamed, type-only, namespace and dynamic imports", () => {
  const source = [
    'import { KubeConfig, type Cluster as C } from "@kubernetes/client-node";',
    'import type { KubernetesObjectApi } from "@kubernetes/client-node";',
    'import * as k8s from "@kubernetes/client-node";',
    'const m = await import("@kubernetes/client-node");',
  ].join("\n");
  assert.equal(clientNodeImports(source), ["KubeConfig", "Cluster", "KubernetesObjectApi", "*", "*"]);
});

Guard("product files import from client-node only what is on the allow-list, and never by namespace", () => {
  const found: string[] = [];
  for (const folder of productFolders) {
    for (const file of productFiles(join(root, folder))) {
      for (const name of clientNodeImports(readFileSync(file, "utf8"))) {
        if (!Object.hasOwn(allowedImports, name)) found.push(`${relative(root, file)}: ${name}`);
      }
    }
  }
  assert.equal(found, [], "take wire JSON through cluster/kubeObjects.ts instead");
});

Guard("no product file names the serializer's manifest entry points", () => {
  const found: string[] = [];
  for (const folder of productFolders) {
    for (const file of productFiles(join(root, folder))) {
      const source = readFileSync(file, "utf8");
      for (const name of forbiddenNames) if (new RegExp(`\\b${name}\\b`).test(source)) found.push(`${relative(root, file)}: ${name}`);
    }
  }
  assert.equal(found, []);
});

interface Attribute {
  readonly name: string;
  readonly baseName: string;
  readonly type: string;
}

function attributesOf(model: string): readonly Attribute[] | undefined {
  const type: unknown = Reflect.get(clientNode, model);
  const map: unknown = typeof type === "function" ? Reflect.get(type, "attributeTypeMap") : undefined;
  return Array.isArray(map) ? (map as Attribute[]) : undefined;
}

/** Every field, at any depth, whose model name is not its wire name. */
function renamedFields(model: string, seen = new Set<string>()): string[] {
  if (seen.has(model)) return [];
  seen.add(model);
  const attributes = attributesOf(model);
  if (attributes === undefined) return [];
  return attributes.flatMap((attribute) => {
    const own = attribute.name === attribute.baseName ? [] : [`${model}.${attribute.baseName} (model: ${attribute.name})`];
    const nested = [...attribute.type.matchAll(/V\d\w*/g)].flatMap((m) => renamedFields(m[0], seen));
    return [...own, ...nested];
  });
}

Guard("the check sees a renamed field where there is one: NetworkPolicy's from, the CRD's preserved fields, a list's continue", () => {
  assert.ok(renamedFields("V1NetworkPolicy").some((f) => f.startsWith("V1NetworkPolicyIngressRule.from")));
  assert.ok(renamedFields("V1CustomResourceDefinition").some((f) => f.includes("x-kubernetes-preserve-unknown-fields")));
  assert.ok(renamedFields("V1RoleList").some((f) => f.startsWith("V1ListMeta.continue")));
});

Guard("the models behind the typed calls product code makes name every field as the wire does", () => {
  // AuthorizationV1Api: the access reviews sent and answered.
  const models = ["V1LocalSubjectAccessReview", "V1SubjectAccessReview"];
  for (const model of models) assert.ok(attributesOf(model), `${model} is a model`);
  assert.equal(
    models.flatMap((model) => renamedFields(model)),
    [],
  );
});

Guard.run();
