import { suite } from "uvu";
import * as assert from "uvu/assert";
import { clusterPorts } from "../../lib/kube/clusterClient.js";
import { aksServerScope } from "../../lib/kube/entraAccess.js";
import { readFleetSettings } from "../../lib/settings.js";
import { startFakeApiServer } from "../support/fakeApiServer.js";
import { fakeCredential } from "../support/fakeCredential.js";

/**
 * Attack review, cluster B against cluster A: every Entra member signs in with the one managed
 * identity, for the one AKS scope, which every AKS API server accepts. An `apiServerUrl` member
 * sends that token to whatever https host its entry names, with no check that it is an AKS API
 * server; whoever answers there (B's team runs the endpoint, its proxy, or its DNS) can replay it
 * against every other member's API server with the identity's rights there (list and read
 * every credential spec). FAILS while the token leaves for a host no AKS domain vouches for.
 */
const Token = suite("attack: the fleet's one token, sent where one member's entry says");

Token("an apiServerUrl member does not send the fleet's AKS token to a host outside the AKS domains", async () => {
  const partner = await startFakeApiServer();
  const fleet = readFleetSettings({
    GMSA_CLUSTERS: JSON.stringify({
      "prod-eu": { aksResourceId: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/prod-eu" },
      partner: { apiServerUrl: partner.url, apiServerCa: partner.caPem },
    }),
    GMSA_CLUSTER_SECRET_PROD_EU: "prod-eu-secret-".padEnd(40, "e"),
    GMSA_CLUSTER_SECRET_PARTNER: "partner-secret-".padEnd(40, "p"),
    GMSA_CREDSPEC_CACHE: "false",
  });
  const member = fleet.members.find((m) => m.name === "partner")!;
  const credential = fakeCredential([{ token: "token-valid-on-every-member", lifetimeMs: 3_600_000 }]);
  let sent = false;
  try {
    // As the runtime's default start builds it: the credential shared by every Entra member.
    const ports = await clusterPorts(member.settings, () => {}, { credential: () => credential });
    await ports.credSpecs.lookup("webapp1-credspec", AbortSignal.timeout(2000)).catch(() => undefined);
    await ports.stop();
    sent = partner.calls.some((c) => c.authorization === "Bearer token-valid-on-every-member");
  } catch (error) {
    // Refused before any call: what the fix would do.
    console.log(`    refused: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await partner.close();
  }
  console.log(`    scopes asked: ${JSON.stringify(credential.calls.map((c) => c.scopes))} (aksServerScope ${aksServerScope}); sent to ${partner.url}: ${sent}`);
  assert.not.ok(sent, `the managed identity's AKS token (scope ${aksServerScope}, the same for prod-eu) was sent to ${partner.url}`);
});

Token.run();
