import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

/** The credential spec fixtures of these tests, a fresh copy per call. */
const dir = join(__dirname, "fixtures");

export interface CredSpecFixture {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  credspec?: any;
}

export function credSpecFile(file: string): CredSpecFixture {
  return parse(readFileSync(join(dir, file), "utf8"));
}

export function fixtureFiles(): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort();
}

export function fixturePath(file: string): string {
  return join(dir, file);
}
