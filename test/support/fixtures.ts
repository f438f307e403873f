import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

/** The example credential specs, fresh copies on every call so a test cannot leak edits. */
const credSpecDir = join(__dirname, "..", "..", "examples", "credspecs");

export interface CredSpecObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  credspec?: Record<string, unknown>;
}

export function credSpecFixtures(): CredSpecObject[] {
  return readdirSync(credSpecDir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((f) => parse(readFileSync(join(credSpecDir, f), "utf8")) as CredSpecObject);
}

export function credSpecFixture(name: string): CredSpecObject {
  const found = credSpecFixtures().find((c) => c.metadata.name === name);
  if (!found) throw new Error(`no example credential spec named ${name}`);
  return found;
}
