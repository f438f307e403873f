import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";

/**
 * The README is a front door that links to docs/: every relative link in it and in docs/ leads to
 * a file that exists, and every #anchor to a heading of that file (GitHub's heading slugs).
 */
const root = join(__dirname, "..", "..");
const pages = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f)),
];

/** GitHub's slug of a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const match of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

const Links = suite("documentation links");

Links("the slug rule reads headings as GitHub does", () => {
  assert.is(slug("Relays wired before the wiring sent wire JSON: open to every pod"), "relays-wired-before-the-wiring-sent-wire-json-open-to-every-pod");
  assert.is(slug("What `npm run bench` measures"), "what-npm-run-bench-measures");
  assert.is(slug("A fleet: one Function App, many clusters"), "a-fleet-one-function-app-many-clusters");
});

Links("every relative link in the README and docs/ leads to a file and heading that exist", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of pages) {
    const text = readFileSync(join(root, page), "utf8").replace(/```[\s\S]*?```/g, "");
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      checked += 1;
      const [path = "", anchor] = target.split("#");
      const file = path === "" ? join(root, page) : resolve(dirname(join(root, page)), path);
      if (!existsSync(file)) {
        broken.push(`${page}: ${target} (no ${relative(root, file)})`);
        continue;
      }
      if (anchor !== undefined && file.endsWith(".md") && !anchors(file).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor})`);
    }
  }
  assert.ok(checked > 10, `${checked} links`);
  assert.equal(broken, []);
});

Links("the README stays a front door", () => {
  const lines = readFileSync(join(root, "README.md"), "utf8").trimEnd().split("\n").length;
  assert.ok(lines <= 350, `README.md has ${lines} lines: depth goes in docs/`);
});

Links.run();
