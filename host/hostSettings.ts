import * as t from "io-ts";
import { readEndpointProtection } from "../lib/settings/endpoint.js";
import { decodeWith, SettingsError } from "../lib/settings/environment.js";

/** Settings of the local host only (the Functions host brings its own port and TLS). */
const Port = new t.Type<number, string, unknown>(
  "PORT",
  (u): u is number => typeof u === "number",
  (u, c) => {
    if (u === undefined || u === "") return t.success(8443);
    const port = typeof u === "string" && /^\d+$/.test(u) ? Number(u) : NaN;
    return port >= 0 && port <= 65535 ? t.success(port) : t.failure(u, c, `PORT must be a port number from 0 to 65535, got ${JSON.stringify(u)}`);
  },
  String,
);

const HostEnvironment = t.type({
  PORT: Port,
  TLS_CERT_FILE: t.union([t.string, t.undefined]),
  TLS_KEY_FILE: t.union([t.string, t.undefined]),
  GMSA_FUNCTION_KEY: t.union([t.string, t.undefined]),
});

export interface HostSettings {
  readonly port: number;
  readonly tlsFiles?: { readonly cert: string; readonly key: string };
  readonly functionKey?: string;
}

export function readHostSettings(env: NodeJS.ProcessEnv = process.env): HostSettings {
  const raw = decodeWith(HostEnvironment, {
    PORT: env.PORT,
    TLS_CERT_FILE: env.TLS_CERT_FILE || undefined,
    TLS_KEY_FILE: env.TLS_KEY_FILE || undefined,
    GMSA_FUNCTION_KEY: env.GMSA_FUNCTION_KEY || undefined,
  });
  if (Boolean(raw.TLS_CERT_FILE) !== Boolean(raw.TLS_KEY_FILE)) throw new SettingsError(["TLS_CERT_FILE and TLS_KEY_FILE go together: set both or neither"]);
  // Azure always demands a key from functions registered with function-level authorization;
  // the local host must not be more open than that.
  if (readEndpointProtection(env).requireFunctionKey && !raw.GMSA_FUNCTION_KEY) {
    throw new SettingsError(["GMSA_REQUIRE_FUNCTION_KEY=true needs GMSA_FUNCTION_KEY, the key the local host then requires"]);
  }
  return {
    port: raw.PORT,
    ...(raw.TLS_CERT_FILE && raw.TLS_KEY_FILE ? { tlsFiles: { cert: raw.TLS_CERT_FILE, key: raw.TLS_KEY_FILE } } : {}),
    ...(raw.GMSA_FUNCTION_KEY ? { functionKey: raw.GMSA_FUNCTION_KEY } : {}),
  };
}
