import { suite } from "uvu";
import * as assert from "uvu/assert";
import { aksServerScope } from "../../lib/kube/entraAccess.js";
import { readAdmissionSettings } from "../../lib/settings/admission.js";
import { SettingsError } from "../../lib/settings/environment.js";
import { readFleetSettings, type FleetSettings } from "../../lib/settings/fleet.js";

/**
 * Attack review, cluster B against cluster A: every Entra member signs in with the one managed
 * identity, for the one AKS scope (aksServerScope), which every AKS API server of the tenant
 * accepts. An `apiServerUrl` entry that names a host of B's choosing (B's team runs the endpoint,
 * its proxy, or its DNS) would hand that token to B, who could replay it against every other
 * member's API server. So such an entry never gets a client: start-up refuses it, or keeps the
 * member out of service. (A fake API server cannot stand in for B here: it listens on loopback,
 * which stays allowed because a token sent there never leaves the machine.)
 */
const Token = suite("attack: the fleet's one token, sent where one member's entry says");

const prodEu = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/prod-eu";

/** The settings' usable members, or the start-up refusal. */
function usable(env: Record<string, string>): { members: FleetSettings["members"]; refused?: string } {
  try {
    return { members: readFleetSettings(env).members };
  } catch (error) {
    assert.instance(error, SettingsError);
    return { members: [], refused: (error as Error).message };
  }
}

for (const host of [
  "https://partner-api.example.net",
  "https://10.20.30.40",
  "https://prod-eu-dns.hcp.westeurope.azmk8s.io.partner.example",
  "https://prod-eu-dns.hcp.westeurope.azmk8s.io:8443",
]) {
  Token(`an apiServerUrl member at ${host} never gets a client, so never the token (scope ${aksServerScope})`, () => {
    const { members, refused } = usable({
      GMSA_CLUSTERS: JSON.stringify({ "prod-eu": { aksResourceId: prodEu }, partner: { apiServerUrl: host } }),
      GMSA_CLUSTER_SECRET_PROD_EU: "prod-eu-secret-0123456789".padEnd(40, "e"),
      GMSA_CLUSTER_SECRET_PARTNER: "partner-secret-0123456789".padEnd(40, "p"),
    });
    assert.not.ok(
      members.some((m) => m.name === "partner"),
      `partner at ${host} would be started with the managed identity's AKS token`,
    );
    if (refused) assert.match(refused, "GMSA_CLUSTERS.partner.apiServerUrl");
  });
}

Token("nor a single cluster's GMSA_API_SERVER_URL outside the AKS domains", () => {
  assert.throws(
    () => readAdmissionSettings({ GMSA_API_SERVER_URL: "https://partner-api.example.net" }),
    (error: unknown) => error instanceof SettingsError && /GMSA_API_SERVER_URL must name an AKS API server/.test(error.message),
  );
});

Token.run();
