import { suite } from "uvu";
import * as assert from "uvu/assert";
import { bundle } from "../../scripts/package.js";

/**
 * What a new instance evaluates before its first admission: the package bundle's modules reached
 * from its entry through static imports, as esbuild bundled them (type imports erased). Modules
 * reached only through `import()` are wrapped by esbuild and evaluated when first imported.
 */
const StartImports = suite("what an instance evaluates at start");

/** The heavy libraries an instance reaching its cluster through Entra (a Function App) must not evaluate at start. */
const onDemand = [
  { library: "@kubernetes/client-node", why: "loaded for a kubeconfig or the in-cluster account only (lib/kube/localKubeConfig.ts)" },
  { library: "@azure/identity", why: "loaded with lib/kube/entraAccess.ts, once the first admission needs a token" },
  { library: "@azure/msal-node", why: "loaded with lib/kube/entraAccess.ts, once the first admission needs a token" },
];

StartImports("the Kubernetes client and the Azure identity libraries are in the package but not evaluated at start", async () => {
  const { metafile } = await bundle({ write: false });
  const inputs = metafile.inputs;
  const eager = new Set<string>();
  // The entry: the import of every function module (scripts/package.ts).
  const entry = Object.keys(inputs).find((path) => path.endsWith("functions-entry.js"));
  assert.ok(entry, "the bundle's entry is among its inputs");
  const pending = [entry];
  while (pending.length > 0) {
    const path = pending.pop()!;
    if (eager.has(path)) continue;
    eager.add(path);
    for (const imported of inputs[path]?.imports ?? []) {
      if (!imported.external && imported.kind !== "dynamic-import") pending.push(imported.path);
    }
  }
  assert.ok(eager.has("lib/app/runtime.ts"), "the walk reaches the application core");
  for (const { library, why } of onDemand) {
    const part = `node_modules/${library}/`;
    const bundled = Object.keys(inputs).filter((path) => path.includes(part));
    assert.ok(bundled.length > 0, `${library} is in the package`);
    const atStart = [...eager].filter((path) => path.includes(part));
    assert.equal(atStart.slice(0, 3), [], `${library} is evaluated at start: ${why}`);
  }
});

StartImports("fp-ts and io-ts are bundled from their ES module builds only, so no import site of ours copies their exports", async () => {
  const { metafile } = await bundle({ write: false });
  for (const library of ["fp-ts", "io-ts"]) {
    const bundled = Object.keys(metafile.inputs).filter((path) => path.includes(`node_modules/${library}/`));
    assert.ok(bundled.length > 0, `${library} is in the package`);
    // Their CommonJS build (lib/) would be joined through a namespace copy, a getter per export,
    // made at every import site of every module at every start.
    assert.equal(
      bundled.filter((path) => !path.includes(`node_modules/${library}/es6/`)),
      [],
      `${library} is bundled from its CommonJS build`,
    );
  }
});

StartImports.run();
