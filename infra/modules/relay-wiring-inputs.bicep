// Deploys nothing: it exists to refuse a relay wiring that lacks what the relay needs, before any
// of it reaches the cluster. Without a function key the relay sends `x-functions-key ""` and every
// GMSA pod is refused; without its TLS key nginx does not start. Main deploys it wherever it wires
// relay mode and makes the wiring wait on it: an empty value fails the deployment here, naming
// the parameter (and the member).

@description('The cluster this is for: "the cluster", or the fleet member\'s name.')
param wiredCluster string

@secure()
@minLength(1)
@description('The function key the relay sends (relayFunctionKey; az functionapp keys list).')
param relayFunctionKey string

@minLength(1)
@description('PEM of the relay certificate\'s CA (ca.crt from npm run wire ... --certificate-out DIR).')
param relayCaCertificate string

@minLength(1)
@description('PEM of the relay\'s serving certificate (tls.crt).')
param relayTlsCertificate string

@secure()
@minLength(1)
@description('PEM of the relay certificate\'s key (tls.key; relayTlsKey, or clusterRelayTlsKeys for a fleet member).')
param relayTlsKey string

// A yes or no, never a value: what the deployment checked, and for which cluster.
output checked object = {
  cluster: wiredCluster
  given: !empty(relayFunctionKey) && !empty(relayCaCertificate) && !empty(relayTlsCertificate) && !empty(relayTlsKey)
}
