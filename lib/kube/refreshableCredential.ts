import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/core-auth";
import { ManagedIdentityCredential } from "@azure/identity";
import { ManagedIdentityApplication } from "@azure/msal-node";

/**
 * A credential that can also hand out a token no cache in this process has served. After the
 * API server refuses a token, asking the ordinary way returns the very same token: MSAL keeps
 * managed identity tokens in one cache shared by every credential in the process, and
 * ManagedIdentityCredential (4.x) passes neither `claims` nor a refresh flag down to it, so
 * neither a new credential instance nor GetTokenOptions gets past that cache.
 */
export interface RefreshableCredential extends TokenCredential {
  getFreshToken(scope: string, options?: GetTokenOptions): Promise<AccessToken | null>;
}

export function isRefreshable(credential: TokenCredential): credential is RefreshableCredential {
  return typeof (credential as Partial<RefreshableCredential>).getFreshToken === "function";
}

/**
 * A user-assigned managed identity: tokens from ManagedIdentityCredential, and fresh ones from
 * MSAL's ManagedIdentityApplication with `forceRefresh`, which asks the identity endpoint and
 * stores the answer in the same shared cache, so later ordinary calls get the new token too.
 *
 * With workload identity (a federated token file) ManagedIdentityCredential builds a new client
 * with an empty cache for every call: its ordinary answer is already fresh.
 */
export function managedIdentityCredential(clientId: string, env: NodeJS.ProcessEnv = process.env): RefreshableCredential {
  const credential = new ManagedIdentityCredential({ clientId });
  const exchangesFederatedToken = Boolean(env.AZURE_FEDERATED_TOKEN_FILE?.trim());
  let application: ManagedIdentityApplication | undefined;
  return {
    getToken: (scopes, options) => credential.getToken(scopes, options),
    async getFreshToken(scope, options) {
      if (exchangesFederatedToken) return credential.getToken(scope, options);
      application ??= new ManagedIdentityApplication({ managedIdentityIdParams: { userAssignedClientId: clientId } });
      const result = await application.acquireToken({ resource: scope, forceRefresh: true });
      if (!result.expiresOn) throw new Error("the managed identity endpoint gave a token without an expiry");
      return {
        token: result.accessToken,
        expiresOnTimestamp: result.expiresOn.getTime(),
        ...(result.refreshOn ? { refreshAfterTimestamp: result.refreshOn.getTime() } : {}),
        tokenType: "Bearer",
      };
    },
  };
}
