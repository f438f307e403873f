import { X509Certificate } from "node:crypto";

/** Where an API server is and which CA signs its serving certificate. */
export interface ApiServerEndpoint {
  /** https://host[:port], without a trailing slash. */
  readonly server: string;
  /** PEM, one certificate or several (during a CA rotation AKS hands out the old and the new). */
  readonly caPem: string | undefined;
}

export class ApiServerEndpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ApiServerEndpointError";
  }
}

/** Checks an API server URL: https only (a bearer token never travels in clear), no query, no fragment. */
export function apiServerUrl(value: string, where: string): string {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw new ApiServerEndpointError(`${where}: "${value.slice(0, 200)}" is not a URL`);
  }
  if (url.protocol !== "https:") throw new ApiServerEndpointError(`${where}: the API server URL must be https, not ${url.protocol.replace(/:$/, "")}`);
  if (url.username || url.password) throw new ApiServerEndpointError(`${where}: the API server URL must not carry credentials`);
  if (url.search || url.hash) throw new ApiServerEndpointError(`${where}: the API server URL must have no query or fragment`);
  return url.toString().replace(/\/+$/, "");
}

const pemBlock = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * A CA bundle given as PEM or as base64 of PEM (the kubeconfig's certificate-authority-data
 * spelling), returned as PEM. Every certificate in it must parse.
 */
export function caBundlePem(value: string, where: string): string {
  const text = value.includes("-----BEGIN") ? value : Buffer.from(value.replace(/\s+/g, ""), "base64").toString("utf8");
  const blocks = text.match(pemBlock) ?? [];
  if (blocks.length === 0) throw new ApiServerEndpointError(`${where}: the CA is neither PEM nor base64 of PEM (no "BEGIN CERTIFICATE" block)`);
  blocks.forEach((block, index) => {
    try {
      new X509Certificate(block);
    } catch {
      throw new ApiServerEndpointError(`${where}: certificate ${index + 1} of the CA bundle does not parse`);
    }
  });
  return `${blocks.join("\n")}\n`;
}
