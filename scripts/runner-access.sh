#!/usr/bin/env bash
# Lets the machine that deploys reach the Function App while it deploys and checks /health, and
# takes that access away again: `runner-access.sh add` before, `runner-access.sh remove` after.
# Used by the deploy workflow and by azd's predeploy and postdeploy hooks.
#
# Only where the app admits a list of addresses (public mode with clusterEgressIpAddresses: the
# app, and its scm site, which follows the app's rules) is there anything to do. In private mode
# the app takes no public traffic at all: deploy from inside the network (docs/deploying.md).
#
# It changes the site's ipSecurityRestrictions alone, with a PATCH of sites/config/web that carries
# nothing else. The CLI's access-restriction commands (add, remove) read and write back the
# whole site configuration, which Flex Consumption refuses with a 400 for properties it does not
# take (Azure/azure-cli issue 31414).
#
# Each deploying machine has a rule of its own (deploy-runner-<address>), so that two deployments
# at once do not take each other's access away; `remove` takes out this machine's alone.
#
# Environment:
#   AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, FUNCTION_APP_NAME   the app (azd's names)
#   RUNNER_IP        the address to admit (default: this machine's public address, from api.ipify.org;
#                    in a GitHub Actions job `add` records it for the job's later `remove`)
set -euo pipefail

action="${1:-}"
case "$action" in
  add | remove) ;;
  *)
    echo "usage: runner-access.sh add|remove" >&2
    exit 2
    ;;
esac
: "${AZURE_SUBSCRIPTION_ID:?runner-access: AZURE_SUBSCRIPTION_ID is not set}"
: "${AZURE_RESOURCE_GROUP:?runner-access: AZURE_RESOURCE_GROUP is not set}"
: "${FUNCTION_APP_NAME:?runner-access: FUNCTION_APP_NAME is not set}"

if ! az account show --output none >/dev/null 2>&1; then
  echo "runner-access: warning: az is not signed in, so an address allow-list on $FUNCTION_APP_NAME cannot be checked; where there is one, run az login and deploy again" >&2
  exit 0
fi
arm="$(az cloud show --query endpoints.resourceManager --output tsv)"
site="${arm%/}/subscriptions/$AZURE_SUBSCRIPTION_ID/resourceGroups/$AZURE_RESOURCE_GROUP/providers/Microsoft.Web/sites/$FUNCTION_APP_NAME"
config="$site/config/web?api-version=2024-04-01"

if [ "$(az rest --method get --url "$site?api-version=2024-04-01" --query properties.publicNetworkAccess --output tsv)" = Disabled ]; then
  echo "runner-access: $FUNCTION_APP_NAME takes no public traffic (private mode): deploy from inside its network"
  exit 0
fi
current="$(az rest --method get --url "$config" --output json)"
default_action="$(jq -r '.properties.ipSecurityRestrictionsDefaultAction // "Allow"' <<<"$current")"
if [ "$action" = add ] && [ "$default_action" = Allow ]; then
  echo "runner-access: $FUNCTION_APP_NAME admits every address; nothing to add"
  exit 0
fi
ip="${RUNNER_IP:-$(curl -fsS --max-time 10 https://api.ipify.org)}"
if ! [[ "$ip" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  echo "runner-access: $ip is not an IPv4 address" >&2
  exit 1
fi
rule="deploy-runner-${ip//./-}"
others="$(jq -c --arg rule "$rule" '[.properties.ipSecurityRestrictions // [] | .[] | select(.name != $rule)]' <<<"$current")"

if [ "$action" = add ]; then
  if [ -n "${GITHUB_ENV:-}" ]; then echo "RUNNER_IP=$ip" >> "$GITHUB_ENV"; fi
  restrictions="$(jq -c --arg rule "$rule" --arg ip "$ip/32" '. + [{name: $rule, description: "The machine that deploys (removed after the deployment)", ipAddress: $ip, action: "Allow", priority: 50}]' <<<"$others")"
else
  if [ "$(jq length <<<"$others")" = "$(jq '.properties.ipSecurityRestrictions // [] | length' <<<"$current")" ]; then
    echo "runner-access: no $rule rule on $FUNCTION_APP_NAME; nothing to remove"
    exit 0
  fi
  restrictions="$others"
fi

body="$(jq -cn --argjson restrictions "$restrictions" '{properties: {ipSecurityRestrictions: $restrictions}}')"
az rest --method patch --url "$config" --body "$body" --output none
if [ "$action" = add ]; then
  echo "runner-access: $ip may reach $FUNCTION_APP_NAME until runner-access.sh remove"
else
  echo "runner-access: the $rule rule is gone from $FUNCTION_APP_NAME"
fi
