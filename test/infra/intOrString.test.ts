import { suite } from "uvu";
import * as assert from "uvu/assert";
import { bicepWiringPath } from "../../cluster/bicepWiring.js";
import { descendants, infraFile, kids, propertyKey, where } from "./bicepTree.js";

/**
 * The Kubernetes extension's type data gives IntOrString fields (rollingUpdate.maxSurge and
 * maxUnavailable, a PodDisruptionBudget's minAvailable, a Service's targetPort) the type string,
 * so an integer there draws BCP036 although the API server takes it: each one carries the
 * suppression, and nothing else does.
 */
const IntOrString = suite("cluster wiring module: IntOrString values");

const intOrStringFields = new Set(["maxSurge", "maxUnavailable", "minAvailable", "targetPort"]);

IntOrString("every integer IntOrString value carries #disable-next-line BCP036, and only those", async () => {
  const file = await infraFile(bicepWiringPath);
  let integers = 0;
  const suppressed: string[] = [];
  for (const object of descendants(file.root, "object")) {
    const children = object.namedChildren.filter((child) => child !== null);
    children.forEach((child, index) => {
      if (child.type === "diagnostic_comment") {
        const next = children[index + 1];
        assert.ok(next?.type === "object_property", `a suppression at ${where(child)} stands before no property`);
        suppressed.push(`${propertyKey(next)} at ${where(next)}`);
        assert.match(child.text, /^#disable-next-line BCP036$/, where(child));
        return;
      }
      if (child.type !== "object_property") return;
      const key = propertyKey(child);
      const value = kids(child)[1];
      if (!intOrStringFields.has(key) || value?.type !== "number") return;
      integers += 1;
      assert.is(children[index - 1]?.type, "diagnostic_comment", `${key} at ${where(child)} has no suppression`);
    });
  }
  assert.ok(integers >= 2, `${integers} integer IntOrString values (the relay's rolling update has two)`);
  assert.is(suppressed.length, integers, suppressed.join(", "));
});

IntOrString.run();
