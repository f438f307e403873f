import type { CustomObjectsApi } from "@kubernetes/client-node";
import { isLeft } from "fp-ts/Either";
import * as t from "io-ts";
import { ClusterUnavailableError, type CredSpecLookup, type CredSpecSource } from "../gmsa/ports.js";
import { callApi, type ApiCallOptions } from "./apiCall.js";

export const credSpecResource = { group: "windows.k8s.io", version: "v1", plural: "gmsacredentialspecs" } as const;

/** A credential spec object, as far as admission reads it: `credspec` must be a JSON object. */
const CredSpecObject = t.partial({ credspec: t.unknown });

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function lookupFromObject(object: unknown): CredSpecLookup {
  const decoded = CredSpecObject.decode(object);
  if (isLeft(decoded) || !isJsonObject(decoded.right.credspec)) return { kind: "noCredspec" };
  return { kind: "found", credspec: decoded.right.credspec };
}

/** Reads GMSACredentialSpecs straight from the API server: one GET per lookup. */
export function credSpecApi(api: CustomObjectsApi, bounds: ApiCallOptions): CredSpecSource {
  return {
    async lookup(name, signal) {
      const outcome = await callApi(`GET gmsacredentialspecs/${name}`, signal, bounds, (options) => api.getClusterCustomObject({ ...credSpecResource, name }, options));
      if (outcome.ok) return lookupFromObject(outcome.value);
      if (outcome.status === 404) return { kind: "notFound" };
      throw new ClusterUnavailableError(
        `the Kubernetes API server refused to read GMSACredentialSpec "${name}" (HTTP ${outcome.status}); check the webhook's own RBAC`,
        "rejected",
        outcome.status,
      );
    },
  };
}
