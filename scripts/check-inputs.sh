#!/usr/bin/env bash
# Checks a deployment's inputs before anything is provisioned, and names each one that is missing
# or malformed: azd's preprovision hook and the workflow run it with the same names (azd
# environment values, repository variables; docs/deploying.md has the table). A deployment with no
# cluster would succeed and grant the app nothing, so the first hour would end with a function
# that refuses every GMSA pod; this stops it here instead.
#
# Environment: GMSA_AKS_RESOURCE_ID or GMSA_CLUSTERS (with GMSA_CLUSTER_SECRETS_B64, or
# GMSA_CLUSTER_SECRETS in the workflow), GMSA_NETWORK_MODE, and in private mode
# GMSA_CLUSTER_VNET_ID, DEPLOY_RUNNER_PREFIXES, GMSA_PRIVATE_WIRE_MODE and the prefixes it needs.
set -uo pipefail

problems=()
problem() { problems+=("$1"); }

aks_id='^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ContainerService/managedClusters/[^/]+$'
vnet_id='^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+$'

# A JSON array of strings, or empty: its length in $length (0 when malformed, which is a problem too).
length=0
array_length() {
  local name="$1" value="${!1:-}"
  length=0
  if [ -z "$value" ]; then return; fi
  if ! jq -e 'type == "array" and all(.[]; type == "string")' >/dev/null 2>&1 <<<"$value"; then
    problem "$name must be a JSON array of strings, such as [\"10.0.0.0/24\"]"
    return
  fi
  length="$(jq 'length' <<<"$value")"
}

single="${GMSA_AKS_RESOURCE_ID:-}"
members="${GMSA_CLUSTERS:-}"
member_count=0
if [ -n "$members" ]; then
  if ! jq -e 'type == "array" and all(.[]; type == "object" and (.name | type) == "string" and (.aksResourceId | type) == "string")' >/dev/null 2>&1 <<<"$members"; then
    problem 'GMSA_CLUSTERS must be a JSON array of members, such as [{"name":"alpha","aksResourceId":"/subscriptions/…/managedClusters/aks-alpha"}]'
  else
    member_count="$(jq 'length' <<<"$members")"
  fi
fi

if [ -z "$single" ] && [ "$member_count" = 0 ]; then
  problem "GMSA_AKS_RESOURCE_ID is required: the resource ID of the AKS cluster the webhooks serve (azd env set GMSA_AKS_RESOURCE_ID /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.ContainerService/managedClusters/<cluster>), or GMSA_CLUSTERS for a fleet"
elif [ -n "$single" ] && [ "$member_count" != 0 ]; then
  problem "GMSA_AKS_RESOURCE_ID and GMSA_CLUSTERS name the cluster twice: a fleet lists every cluster in GMSA_CLUSTERS; unset GMSA_AKS_RESOURCE_ID"
elif [ -n "$single" ] && ! [[ "$single" =~ $aks_id ]]; then
  problem "GMSA_AKS_RESOURCE_ID is not the resource ID of a managed cluster (/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.ContainerService/managedClusters/<cluster>)"
fi

if [ "$member_count" != 0 ]; then
  while IFS=$'\t' read -r name id; do
    if ! [[ "$id" =~ $aks_id ]]; then problem "GMSA_CLUSTERS: member $name: aksResourceId is not the resource ID of a managed cluster"; fi
  done < <(jq -r '.[] | [.name, .aksResourceId] | @tsv' <<<"$members")
  secrets=""
  if [ -n "${GMSA_CLUSTER_SECRETS:-}" ]; then
    secrets="$GMSA_CLUSTER_SECRETS"
  elif [ -n "${GMSA_CLUSTER_SECRETS_B64:-}" ]; then
    secrets="$(base64 -d <<<"$GMSA_CLUSTER_SECRETS_B64" 2>/dev/null || true)"
  fi
  if [ -z "$secrets" ]; then
    problem "GMSA_CLUSTER_SECRETS_B64 is required for a fleet: base64 of a JSON object, member name -> its secret (docs/fleet.md)"
  elif ! jq -e 'type == "object"' >/dev/null 2>&1 <<<"$secrets"; then
    problem "the fleet's secrets (GMSA_CLUSTER_SECRETS_B64) are not base64 of a JSON object, member name -> secret"
  else
    # Names only: a secret is never repeated.
    # The secrets reach jq through its environment, never its command line (ps shows that).
    missing="$(SECRETS="$secrets" jq -r '($ENV.SECRETS | fromjson) as $secrets | .[] | select(($secrets[.name] // "") == "") | .name' <<<"$members")"
    while read -r name; do
      if [ -n "$name" ]; then problem "the fleet's secrets have none for member $name"; fi
    done <<<"$missing"
  fi
fi

mode="${GMSA_NETWORK_MODE:-public}"
case "$mode" in
  public)
    array_length GMSA_CLUSTER_EGRESS_IPS
    ;;
  private)
    vnet="${GMSA_CLUSTER_VNET_ID:-}"
    if [ -z "$vnet" ] && [ -z "${GMSA_SITES_DNS_ZONE_ID:-}" ]; then
      problem "GMSA_CLUSTER_VNET_ID is required in private mode: the cluster's VNet, linked to the private DNS zone and peered (or GMSA_SITES_DNS_ZONE_ID for a hub's zone that already resolves there)"
    elif [ -n "$vnet" ] && ! [[ "$vnet" =~ $vnet_id ]]; then
      problem "GMSA_CLUSTER_VNET_ID is not the resource ID of a virtual network"
    fi
    array_length DEPLOY_RUNNER_PREFIXES
    if [ "$length" = 0 ]; then
      problem "DEPLOY_RUNNER_PREFIXES is required in private mode: the address prefixes of the machine that deploys (the app takes no public traffic), such as [\"203.0.113.7/32\"]"
    fi
    case "${GMSA_PRIVATE_WIRE_MODE:-url}" in
      url)
        array_length GMSA_API_SERVER_SUBNET_PREFIXES
        if [ "$length" = 0 ]; then
          problem "GMSA_API_SERVER_SUBNET_PREFIXES is required in private mode with url wiring: the API server subnet (API Server VNet Integration), the only cluster source the endpoint admits"
        fi
        ;;
      relay)
        array_length GMSA_RELAY_SOURCE_PREFIXES
        if [ "$length" = 0 ]; then
          problem "GMSA_RELAY_SOURCE_PREFIXES is required in private mode with relay wiring: the node (and pod) subnets the relay sends from"
        fi
        ;;
      *) problem "GMSA_PRIVATE_WIRE_MODE must be url or relay, not ${GMSA_PRIVATE_WIRE_MODE}" ;;
    esac
    ;;
  *) problem "GMSA_NETWORK_MODE must be public or private, not $mode" ;;
esac

for flag in GMSA_CLUSTER_AZURE_RBAC GMSA_AUTHORIZE_REQUESTING_USER GMSA_RANDOM_HOSTNAME GMSA_API_SERVER_LOGS GMSA_AUDIT; do
  value="${!flag:-}"
  if [ -n "$value" ] && [ "$value" != true ] && [ "$value" != false ]; then problem "$flag must be true or false, not $value"; fi
done

if [ "${#problems[@]}" -gt 0 ]; then
  echo "check-inputs: the deployment's inputs are not complete; nothing was provisioned:" >&2
  for line in "${problems[@]}"; do echo "  - $line" >&2; done
  echo "  (docs/deploying.md lists every input)" >&2
  exit 1
fi
if [ -n "$single" ]; then
  echo "check-inputs: one cluster, $mode mode: inputs complete"
else
  echo "check-inputs: a fleet of $member_count clusters, $mode mode: inputs complete"
fi
