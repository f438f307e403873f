/**
 * The credential could not give a token: no identity, the identity endpoint failed, or it timed
 * out. In a file of its own so that every API call can recognise it without loading the Azure
 * identity libraries into instances that reach their cluster by kubeconfig or from inside it.
 */
export class EntraTokenError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EntraTokenError";
  }
}
