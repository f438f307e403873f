import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { knownKeys } from "../../lib/credspec/credSpecCodec.js";
import { withDocumentedKeyCase } from "../../lib/credspec/credSpecKeyCase.js";
import { credSpecFile } from "../lib/credspec/credSpecFixtures.js";

/**
 * Respelling keys in the documented case, over the fixtures' well-formed specs with documented
 * keys given in another case at random (a key in upper or lower case, or with one letter's case
 * flipped), anywhere the codecs read one: the value that comes back is the fixture as written,
 * each key changed is one warning at its path and no other finding is made; a spec whose keys
 * are all as documented comes back as the very object given, with no finding.
 */
const KeyCase = suite("keys in another case are respelled as documented");

const runs = Number(process.env.PROPERTY_RUNS ?? 300);

interface Place {
  /** The object holding the key, reached from `credspec`. */
  readonly holder: readonly (string | number)[];
  readonly key: string;
  /** The key's path as findings name it. */
  readonly path: string;
}

/** Every documented key of a spec, with where it sits: what the generator may respell. */
function documentedPlaces(value: unknown, level: string, holder: readonly (string | number)[], path: string): Place[] {
  const keys = knownKeys[level];
  if (!keys || typeof value !== "object" || value === null) return [];
  if (Array.isArray(value)) {
    return value.flatMap((item, i) => documentedPlaces(item, level, [...holder, i], `${path}[${i}]`));
  }
  return Object.keys(value)
    .filter((key) => keys.includes(key))
    .flatMap((key) => {
      const here: Place = { holder, key, path: `${path}.${key}` };
      const below = level === "GroupManagedServiceAccounts" ? [] : documentedPlaces((value as Record<string, unknown>)[key], key, [...holder, key], `${path}.${key}`);
      return [here, ...below];
    });
}

function at(root: unknown, steps: readonly (string | number)[]): Record<string, unknown> {
  return steps.reduce<any>((value, step) => value[step], root);
}

/** Another spelling of `key`, never the documented one. */
function respelling(key: string, how: number): string {
  const variants = [key.toUpperCase(), key.toLowerCase(), ...[...key].map((_, i) => key.slice(0, i) + flip(key[i]!) + key.slice(i + 1))].filter((v) => v !== key);
  return variants[how % variants.length]!;
}

function flip(c: string): string {
  return c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase();
}

const specs = ["domain-joined.yaml", "aks-keyvault.yaml", "eks-domainless.yaml"].map((file) => credSpecFile(file).credspec as unknown);

KeyCase("respelled keys come back as documented, each a warning at its path, and nothing else is found", () => {
  fc.assert(
    fc.property(fc.constantFrom(...specs.keys()), fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 6 }), (which, picks) => {
      const original = specs[which]!;
      const spec = structuredClone(original);
      const places = documentedPlaces(spec, "", [], "credspec");
      // Inner keys first: a holder is found by its documented path, so the keys inside it are respelled before it is.
      const chosen = [...new Map(picks.map(([place, how]) => [places[place % places.length]!, how])).entries()].sort(([a], [b]) => b.holder.length - a.holder.length);
      for (const [place, how] of chosen) {
        const holder = at(spec, place.holder);
        const spelled = respelling(place.key, how);
        // Keep the order of keys: rebuild the holder with the key in its place.
        const entries = Object.entries(holder).map(([key, value]) => [key === place.key ? spelled : key, value] as const);
        for (const key of Object.keys(holder)) delete holder[key];
        for (const [key, value] of entries) holder[key] = value;
      }
      const respelled = withDocumentedKeyCase(spec, "credspec");
      assert.equal(respelled.errors, []);
      assert.equal(JSON.parse(JSON.stringify(respelled.value)), original);
      const warned = respelled.warnings.map((w) => w.path.split(".").at(-1)!.toLowerCase()).sort();
      assert.equal(warned, chosen.map(([place]) => place.key.toLowerCase()).sort());
      if (chosen.length === 0) {
        assert.is(respelled.value, spec, "a spec spelled as documented is kept as it is");
        assert.equal(respelled.warnings, []);
      }
    }),
    { numRuns: runs },
  );
});

KeyCase.run();
