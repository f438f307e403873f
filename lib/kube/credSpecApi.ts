import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { credSpecObjectTooLarge, maxCredSpecObjectBytes } from "../gmsa/credSpecSize.js";
import { type CredSpecLookup, type CredSpecSource } from "../gmsa/ports.js";
import { ClusterUnavailableError } from "../webhook/clusterUnavailable.js";
import { callApi, type ApiCallOptions } from "./apiCall.js";
import type { ApiServerConnection } from "./apiServerConnection.js";
import { isJsonObject } from "../jsonObject.js";
import { jsonCopy, parsedFromLonger } from "../jsonSize.js";

export const credSpecResource = { group: "windows.k8s.io", version: "v1", plural: "gmsacredentialspecs" } as const;

/** Where the cluster's credential specs are listed and watched; one spec is this plus `/<name>`. */
export const credSpecPath = `/apis/${credSpecResource.group}/${credSpecResource.version}/${credSpecResource.plural}`;

/** A credential spec object, as far as admission reads it: `credspec` must be a JSON object. */
const CredSpecObject = t.partial({ credspec: t.unknown });

function isNamedObject(value: unknown, name: string): boolean {
  if (!isJsonObject(value) || !isJsonObject(value.metadata)) return false;
  return value.metadata.name === name;
}

/**
 * What admission reads of a spec object, however it arrived (a GET, a list, the watch): one
 * larger than credSpecSize.ts allows is `tooLarge`, whatever it holds.
 */
export function lookupFromObject(object: unknown): CredSpecLookup {
  if (credSpecObjectTooLarge(object)) return { kind: "tooLarge" };
  const decoded = CredSpecObject.decode(object);
  if (isLeft(decoded) || !isJsonObject(decoded.right.credspec)) return { kind: "noCredspec" };
  // A copy, not what JSON.parse made from the text read (jsonSize.ts jsonCopy); the object is
  // no deeper than credSpecSize.ts allows.
  return { kind: "found", credspec: jsonCopy(decoded.right.credspec) };
}

/**
 * Read past maxCredSpecObjectBytes, so that the object's size decides, not how the server spaced
 * it: the API server ends its JSON with a newline, and may write a number a few characters longer.
 */
const getSlackBytes = 4096;

/** Reads GMSACredentialSpecs straight from the API server: one GET per lookup. */
export function credSpecApi(connection: ApiServerConnection, bounds: ApiCallOptions): CredSpecSource {
  return {
    async lookup(name, call) {
      const path = `${credSpecPath}/${encodeURIComponent(name)}`;
      const outcome = await callApi(`GET gmsacredentialspecs/${name}`, call, bounds, (callSignal) =>
        connection.send({ method: "GET", path, signal: callSignal, timeoutMs: bounds.timeoutMs, maxBodyBytes: maxCredSpecObjectBytes + getSlackBytes }),
      );
      if (outcome.ok) {
        // Text that parses into less than it says may hold more than is counted (jsonSize.ts).
        if (outcome.bytes !== undefined && parsedFromLonger(outcome.bytes, outcome.value)) return { kind: "tooLarge" };
        // A 2xx that is not this spec (a proxy's page, an empty body) is the path failing, not the spec being wrong.
        if (!isNamedObject(outcome.value, name)) {
          throw new ClusterUnavailableError(`the Kubernetes API server answered GET gmsacredentialspecs/${name} with something that is not that GMSACredentialSpec`, "serverError");
        }
        return lookupFromObject(outcome.value);
      }
      if (outcome.status === 404) return { kind: "notFound" };
      // Read no further: parsed, it could take many times its length (credSpecSize.ts). One read whole is
      // judged by lookupFromObject, as the cache judges what the list and the watch bring.
      if (outcome.tooLarge && outcome.status < 300) return { kind: "tooLarge" };
      throw new ClusterUnavailableError(
        `the Kubernetes API server refused to read GMSACredentialSpec "${name}" (HTTP ${outcome.status}); check the webhook's own RBAC`,
        "rejected",
        outcome.status,
      );
    },
  };
}
