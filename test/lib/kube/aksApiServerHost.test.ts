import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ApiServerHostError, checkAksApiServer, isLoopbackOrigin } from "../../../lib/kube/aksApiServerHost.js";

const publicFqdn = "aks-one-dns-1a2b3c4d.hcp.westeurope.azmk8s.io";
const privateFqdn = "aks-one-7f3a9c.0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6.privatelink.westeurope.azmk8s.io";
const portalFqdn = "aks-one-dns-1a2b3c4d.portal.hcp.westeurope.azmk8s.io";
const declared = [publicFqdn, privateFqdn, portalFqdn];
const where = "listClusterUserCredential for aks-one";

const Host = suite("which API server may receive the webhook's token");

const accepted: Array<[string, string, readonly string[]]> = [
  ["the cluster's public FQDN", `https://${publicFqdn}:443`, declared],
  ["the same without an explicit port", `https://${publicFqdn}`, declared],
  ["the cluster's private FQDN", `https://${privateFqdn}:443`, declared],
  ["the portal FQDN", `https://${portalFqdn}`, declared],
  ["a name in another case than declared", `https://${publicFqdn.toUpperCase()}:443`, declared],
  ["a custom private DNS subzone", "https://aks-one.team-a.privatelink.westeurope.azmk8s.io", ["aks-one.team-a.privatelink.westeurope.azmk8s.io"]],
  ["Azure Government", "https://aks-gov-1a2b.hcp.usgovvirginia.cx.aks.containerservice.azure.us:443", ["aks-gov-1a2b.hcp.usgovvirginia.cx.aks.containerservice.azure.us"]],
  ["Azure operated by 21Vianet", "https://aks-cn-1a2b.hcp.chinanorth3.cx.prod.service.azk8s.cn:443", ["aks-cn-1a2b.hcp.chinanorth3.cx.prod.service.azk8s.cn"]],
];
for (const [what, server, names] of accepted) {
  Host(`accepts ${what}`, () => {
    checkAksApiServer(server, { clusterHostNames: names }, where);
  });
}

const refused: Array<[string, string, readonly string[], RegExp]> = [
  ["a host the cluster does not declare", "https://attacker.example:443", declared, /attacker\.example, which is not a host name the managed cluster declares/],
  ["another AKS cluster's API server", "https://other-cluster-dns-9z8y.hcp.westeurope.azmk8s.io", declared, /not a host name the managed cluster declares/],
  ["a declared name outside the AKS domains", "https://api.contoso.com", ["api.contoso.com"], /not under a domain where AKS serves API servers/],
  ["a look-alike domain", "https://aks-one.azmk8s.io.attacker.example", ["aks-one.azmk8s.io.attacker.example"], /not under a domain where AKS serves/],
  ["a domain that only ends in the same letters", "https://aks-one.notazmk8s.io", ["aks-one.notazmk8s.io"], /not under a domain where AKS serves/],
  ["another port", `https://${publicFqdn}:6443`, declared, /uses port 6443/],
  ["an IP address", "https://10.1.2.3", ["10.1.2.3"], /is an IP address/],
  ["loopback without the test seam", "https://127.0.0.1:6443", ["127.0.0.1"], /is an IP address/],
  ["loopback with the test seam but not declared", "https://127.0.0.1:6443", declared, /not a host name the managed cluster declares/],
  ["anything when the cluster declares nothing", `https://${publicFqdn}`, [], /none declared/],
];
for (const [what, server, names, message] of refused) {
  Host(`refuses ${what}, with a message that names the host and the rule`, () => {
    try {
      checkAksApiServer(server, { clusterHostNames: names, loopbackForTests: what.includes("with the test seam") }, where);
      assert.unreachable("should have been refused");
    } catch (error) {
      assert.instance(error, ApiServerHostError);
      assert.match((error as Error).message, message);
      assert.match((error as Error).message, where);
    }
  });
}

Host("the test seam accepts a declared loopback host on any port", () => {
  checkAksApiServer("https://127.0.0.1:34567", { clusterHostNames: ["127.0.0.1"], loopbackForTests: true }, where);
  checkAksApiServer("https://localhost:34567", { clusterHostNames: ["127.0.0.1", "localhost"], loopbackForTests: true }, where);
});

Host("only an https loopback origin counts as a test's ARM endpoint", () => {
  assert.ok(isLoopbackOrigin("https://127.0.0.1:4443"));
  assert.ok(isLoopbackOrigin("https://localhost:4443"));
  assert.not.ok(isLoopbackOrigin("https://management.azure.com"));
  assert.not.ok(isLoopbackOrigin("https://127.0.0.1.attacker.example"));
});

Host.run();
