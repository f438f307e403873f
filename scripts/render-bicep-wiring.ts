import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { bicepWiringPath, renderBicepWiring } from "../cluster/bicepWiring.js";

/** Regenerates infra/modules/cluster-wiring.bicep from the wiring renderer (run after changing cluster/). */
const path = join(__dirname, "..", bicepWiringPath);
writeFileSync(path, renderBicepWiring());
process.stdout.write(`wrote ${bicepWiringPath}\n`);
