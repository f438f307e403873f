import * as t from "io-ts";
import { booleanSetting, decodeWith, emptyAsUnset, oneOf, SettingsError, withDefault } from "./environment.js";

const networkModes = ["public", "private"] as const;
export type NetworkMode = (typeof networkModes)[number];

const wiringModes = ["url", "relay"] as const;
/** How the API server's calls arrive: straight from the API server (url), or through the in-cluster relay. */
export type WiringMode = (typeof wiringModes)[number];

const EndpointEnvironment = t.type({
  GMSA_REQUIRE_FUNCTION_KEY: withDefault(booleanSetting("GMSA_REQUIRE_FUNCTION_KEY"), false),
  GMSA_NETWORK_MODE: t.union([oneOf("GMSA_NETWORK_MODE", networkModes), t.undefined]),
  GMSA_WIRING_MODE: t.union([oneOf("GMSA_WIRING_MODE", wiringModes), t.undefined]),
  // Set by App Service on every Function App: the app is on Azure, where reachability is decided
  // by the network mode.
  WEBSITE_SITE_NAME: t.union([t.string, t.undefined]),
  // Set in every pod: an app run inside a cluster is reachable by that cluster's pods.
  KUBERNETES_SERVICE_HOST: t.union([t.string, t.undefined]),
});

/** Who may call the webhooks and /metrics: decided when the functions are registered. */
export interface EndpointProtection {
  /** Callers must present a function key (function-level authorization). */
  readonly requireFunctionKey: boolean;
  /** How the app is reachable, as deployed; unset outside Azure. */
  readonly networkMode?: NetworkMode;
  /** How the API server's calls reach the app, as deployed; unset outside Azure. */
  readonly wiringMode?: WiringMode;
}

/**
 * Read before any function is registered (the authorization level is fixed at registration), so
 * a bad value stops the app from loading at all rather than leaving an endpoint open.
 *
 * An AdmissionReview carries no proof that the API server wrote it: whoever reaches the webhooks
 * can ask for any credential spec's contents in the name of a service account that may use it.
 * So a deployed app serves them without a function key in one case only: private, and called by
 * the API server itself (url wiring), whose subnet alone the private endpoint admits. The API
 * server cannot send a key there; a relay can, and its pods share their subnets with every pod.
 */
export function readEndpointProtection(env: NodeJS.ProcessEnv = process.env): EndpointProtection {
  const raw = decodeWith(EndpointEnvironment, emptyAsUnset(env, Object.keys(EndpointEnvironment.props)));
  const onAzure = raw.WEBSITE_SITE_NAME !== undefined;
  const inPod = raw.KUBERNETES_SERVICE_HOST !== undefined;
  // On Azure, an app that does not say how it is reachable might be public; in a pod, every other
  // pod may reach it: neither starts without saying how it is reached.
  if ((onAzure || inPod) && raw.GMSA_NETWORK_MODE === undefined) {
    const where = onAzure ? `on a Function App (${raw.WEBSITE_SITE_NAME})` : "inside a pod (KUBERNETES_SERVICE_HOST is set)";
    throw new SettingsError([`GMSA_NETWORK_MODE must be public or private ${where}; the Bicep in infra/ sets it`]);
  }
  // A public endpoint without keys would let anyone on the internet ask for credential specs.
  if (raw.GMSA_NETWORK_MODE === "public" && !raw.GMSA_REQUIRE_FUNCTION_KEY) {
    throw new SettingsError(["GMSA_NETWORK_MODE=public needs GMSA_REQUIRE_FUNCTION_KEY=true: the webhooks are never served anonymously on a public endpoint"]);
  }
  const deployed = onAzure || inPod || raw.GMSA_NETWORK_MODE !== undefined || raw.GMSA_WIRING_MODE !== undefined;
  if (deployed) {
    if (raw.GMSA_NETWORK_MODE === undefined || raw.GMSA_WIRING_MODE === undefined) {
      throw new SettingsError(["GMSA_NETWORK_MODE (public or private) and GMSA_WIRING_MODE (url or relay) go together: a deployment says both; the Bicep in infra/ sets them"]);
    }
    if (raw.GMSA_NETWORK_MODE === "public" && raw.GMSA_WIRING_MODE === "url") {
      throw new SettingsError(["GMSA_WIRING_MODE=url needs GMSA_NETWORK_MODE=private: a public app is reached through the relay, which sends the function key"]);
    }
    // Relay wiring: the relay's traffic leaves from the node (or pod) subnets, which every pod
    // shares, so the network cannot tell the relay from a pod that forges reviews; the key can.
    if (raw.GMSA_WIRING_MODE === "relay" && !raw.GMSA_REQUIRE_FUNCTION_KEY) {
      throw new SettingsError([
        "GMSA_WIRING_MODE=relay needs GMSA_REQUIRE_FUNCTION_KEY=true: the relay sends the function key, and without it any pod that reaches the app could forge admission reviews",
      ]);
    }
  }
  return {
    requireFunctionKey: raw.GMSA_REQUIRE_FUNCTION_KEY,
    ...(raw.GMSA_NETWORK_MODE ? { networkMode: raw.GMSA_NETWORK_MODE } : {}),
    ...(raw.GMSA_WIRING_MODE ? { wiringMode: raw.GMSA_WIRING_MODE } : {}),
  };
}
