import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";

/**
 * Every setting is an environment variable, the same names locally and as Function App
 * settings. They are decoded once at start-up; a bad value stops start-up with its name.
 */

export function booleanSetting(name: string): t.Type<boolean, string, unknown> {
  return new t.Type<boolean, string, unknown>(
    name,
    (u): u is boolean => typeof u === "boolean",
    (u, c) => {
      const text = typeof u === "string" ? u.trim().toLowerCase() : u;
      if (text === "true" || text === "1") return t.success(true);
      if (text === "false" || text === "0" || text === "") return t.success(false);
      return t.failure(u, c, `${name} must be true or false, got ${JSON.stringify(u)}`);
    },
    String,
  );
}

export function integerSetting(name: string, min: number, max: number): t.Type<number, string, unknown> {
  return new t.Type<number, string, unknown>(
    name,
    (u): u is number => typeof u === "number",
    (u, c) => {
      const value = typeof u === "string" && /^\s*\d+\s*$/.test(u) ? Number(u) : NaN;
      return Number.isInteger(value) && value >= min && value <= max
        ? t.success(value)
        : t.failure(u, c, `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(u)}`);
    },
    String,
  );
}

export function oneOf<const V extends string>(name: string, values: readonly V[]): t.Type<V, string, unknown> {
  return new t.Type<V, string, unknown>(
    name,
    (u): u is V => typeof u === "string" && (values as readonly string[]).includes(u),
    (u, c) =>
      typeof u === "string" && (values as readonly string[]).includes(u)
        ? t.success(u as V)
        : t.failure(u, c, `${name} must be one of ${values.join(", ")}, got ${JSON.stringify(u)}`),
    String,
  );
}

export function withDefault<A>(codec: t.Type<A, string, unknown>, fallback: A): t.Type<A, string, unknown> {
  return new t.Type<A, string, unknown>(codec.name, codec.is, (u, c) => (u === undefined ? t.success(fallback) : codec.validate(u, c)), codec.encode);
}

export class SettingsError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid settings:\n  ${problems.join("\n  ")}`);
    this.name = "SettingsError";
  }
}

export function emptyAsUnset(env: NodeJS.ProcessEnv, names: readonly string[]): Record<string, string | undefined> {
  return Object.fromEntries(names.map((name) => [name, env[name] === "" ? undefined : env[name]]));
}

export function decodeWith<A>(codec: t.Decoder<unknown, A>, env: Record<string, string | undefined>): A {
  const decoded = codec.decode(env);
  if (isLeft(decoded))
    throw new SettingsError([
      ...new Set(
        decoded.left.map(
          (e) =>
            e.message ??
            `${e.context
              .map((c) => c.key)
              .filter(Boolean)
              .join(".")} is invalid`,
        ),
      ),
    ]);
  return decoded.right;
}
