#!/usr/bin/env bash
# Wires the deployed Function App into its cluster, or every fleet member the deployment did not
# wire itself (members without "wire" in the clusters parameter), then proves each cluster's path
# with the readiness check (`npm run wire -- --check`: a dry-run GMSA pod the webhooks must refuse,
# through the wiring, the function, its identity and the cluster's RBAC). For each cluster: its AKS
# credentials into a kubeconfig of its own, kubelogin for Entra sign-in, then `npm run wire -- ...
# --apply --check`, a fleet member with its secret in a file. Used by the deploy workflow and by
# azd's postdeploy hook, so both wire and check the same way, one cluster or a fleet. Nothing
# secret is printed; the files go when the script ends.
#
# kubelogin signs in with the Azure CLI's session (azd, a person's `az login`), or, in a GitHub
# Actions job that may request OIDC tokens (AZURE_CLIENT_ID and AZURE_TENANT_ID set), with its
# workload identity mode, which asks GitHub for a fresh assertion for every token: the CLI's own
# federated sign-in cannot be renewed once its assertion expires (Azure/login issue 372).
#
# Environment (the names azd gives main.bicep's outputs and the deployment's settings):
#   GMSA_AKS_RESOURCE_ID        one cluster: its resource ID (ignored when GMSA_CLUSTERS names a fleet)
#   GMSA_CLUSTERS               a fleet: JSON array of members, as the clusters parameter
#   GMSA_CLUSTER_SECRETS        JSON object, member name -> secret ("new,old" while rotating: "new" is wired)
#   GMSA_CLUSTER_SECRETS_B64    or the same object as base64 of its JSON (azd)
#   WEBHOOK_BASE_URL, WIRE_MODE, IDENTITY_PRINCIPAL_ID     outputs of main.bicep
#   FUNCTION_APP_NAME, AZURE_RESOURCE_GROUP                relay mode: where the function key is read
#   AZURE_SUBSCRIPTION_ID       the app's subscription (otherwise whichever `az` has selected)
#   GMSA_CHECK_TIMEOUT_SECONDS  how long each readiness check keeps asking (default 180: a relay's first rollout)
#   GMSA_FUNCTION_CA_FILE       url wiring: the CA bundle of the function's certificate when it is not a
#                               public one (a private CA; the end-to-end suite's local function)
#   ALERT_ROUTING_WARNING       output of main.bicep: set when no alert reaches anyone (printed)
set -euo pipefail

if [ -n "${ALERT_ROUTING_WARNING:-}" ]; then echo "wire-deployed: WARNING: $ALERT_ROUTING_WARNING"; fi

if [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] && [ -n "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ] && [ -n "${AZURE_CLIENT_ID:-}" ] && [ -n "${AZURE_TENANT_ID:-}" ]; then
  login_mode=workloadidentity
else
  login_mode=azurecli
fi
subscription_args=()
if [ -n "${AZURE_SUBSCRIPTION_ID:-}" ]; then subscription_args=(--subscription "$AZURE_SUBSCRIPTION_ID"); fi

members="${GMSA_CLUSTERS:-}"
# Checked here, not only by check-inputs.sh: azd deploy runs this hook without preprovision.
if [ -n "$members" ] && ! jq -e 'type == "array" and all(.[]; type == "object" and (.name | type) == "string" and (.aksResourceId | type) == "string")' >/dev/null 2>&1 <<<"$members"; then
  echo "wire-deployed: GMSA_CLUSTERS is not a JSON array of members ({\"name\": ..., \"aksResourceId\": ...})" >&2
  exit 1
fi
if [ -z "$members" ] || [ "$(jq 'length' <<<"$members")" = 0 ]; then members=""; fi
single="${GMSA_AKS_RESOURCE_ID:-}"
if [ -z "$members" ] && [ -z "$single" ]; then
  echo "wire-deployed: NO CLUSTER IS WIRED: neither GMSA_AKS_RESOURCE_ID nor GMSA_CLUSTERS names one (azd env set GMSA_AKS_RESOURCE_ID <cluster resource ID>, then azd up; docs/deploying.md)"
  exit 0
fi

: "${WEBHOOK_BASE_URL:?wire-deployed: WEBHOOK_BASE_URL is not set}"
: "${WIRE_MODE:?wire-deployed: WIRE_MODE is not set}"
: "${IDENTITY_PRINCIPAL_ID:?wire-deployed: IDENTITY_PRINCIPAL_ID is not set}"
check_args=(--check --check-timeout-seconds "${GMSA_CHECK_TIMEOUT_SECONDS:-180}")
# What the app was deployed with decides what its identity must be granted: the requesting-user
# check needs SubjectAccessReviews, the audit its read-only role.
policy_args=()
if [ "${GMSA_AUTHORIZE_REQUESTING_USER:-false}" = true ]; then policy_args+=(--authorize-requesting-user); fi
if [ "${GMSA_AUDIT:-false}" = true ]; then policy_args+=(--audit); fi

secrets='{}'
if [ -n "$members" ]; then
  if [ -n "${GMSA_CLUSTER_SECRETS:-}" ]; then
    secrets="$GMSA_CLUSTER_SECRETS"
  elif [ -n "${GMSA_CLUSTER_SECRETS_B64:-}" ]; then
    secrets="$(base64 -d <<<"$GMSA_CLUSTER_SECRETS_B64")"
  else
    echo "wire-deployed: the members' secrets are missing: set GMSA_CLUSTER_SECRETS or GMSA_CLUSTER_SECRETS_B64" >&2
    exit 1
  fi
  if ! jq -e 'type == "object"' >/dev/null 2>&1 <<<"$secrets"; then
    echo "wire-deployed: the members' secrets are not a JSON object (name -> secret)" >&2
    exit 1
  fi
fi

work="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/wire-deployed.XXXXXX")"
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT
umask 077

key_args=()
if [ "$WIRE_MODE" = relay ]; then
  : "${FUNCTION_APP_NAME:?wire-deployed: relay mode reads the function key: FUNCTION_APP_NAME is not set}"
  : "${AZURE_RESOURCE_GROUP:?wire-deployed: relay mode reads the function key: AZURE_RESOURCE_GROUP is not set}"
  az functionapp keys list "${subscription_args[@]}" --resource-group "$AZURE_RESOURCE_GROUP" --name "$FUNCTION_APP_NAME" \
    --query functionKeys.default --output tsv > "$work/function-key"
  key_args=(--function-key-file "$work/function-key")
fi
if [ -n "${GMSA_FUNCTION_CA_FILE:-}" ]; then key_args+=(--ca-bundle-file "$GMSA_FUNCTION_CA_FILE"); fi

aks_id='^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.ContainerService/managedClusters/([^/]+)$'

# One cluster: wired on the single-cluster paths, then checked.
if [ -z "$members" ]; then
  if ! [[ "$single" =~ $aks_id ]]; then
    echo "wire-deployed: GMSA_AKS_RESOURCE_ID is not the resource ID of a managed cluster" >&2
    exit 1
  fi
  subscription="${BASH_REMATCH[1]}" group="${BASH_REMATCH[2]}" cluster="${BASH_REMATCH[3]}"
  echo "wire-deployed: wiring $cluster in $group"
  kubeconfig="$work/kubeconfig"
  az aks get-credentials --subscription "$subscription" --resource-group "$group" --name "$cluster" \
    --file "$kubeconfig" --overwrite-existing --only-show-errors
  kubelogin convert-kubeconfig -l "$login_mode" --kubeconfig "$kubeconfig"
  KUBECONFIG="$kubeconfig" npm run --silent wire -- \
    --function-url "$WEBHOOK_BASE_URL" --mode "$WIRE_MODE" --identity "$IDENTITY_PRINCIPAL_ID" \
    --apply "${check_args[@]}" "${key_args[@]}" "${policy_args[@]}"
  exit 0
fi

dns_label='^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'
# Built before the loop, where set -e sees a failure (a process substitution's is lost).
rows="$(jq -r '.[] | [.name, .aksResourceId, (if .wire == null then "false" else "true" end)] | @tsv' <<<"$members")"
failed=0
while IFS=$'\t' read -r name id wired; do
  if ! [[ "$name" =~ $dns_label ]]; then
    echo "wire-deployed: member name ${name@Q} is not a DNS label" >&2
    failed=1
    continue
  fi
  if [ "$wired" = true ]; then
    echo "wire-deployed: $name is wired by the deployment (wire in the clusters parameter)"
    continue
  fi
  if ! [[ "$id" =~ $aks_id ]]; then
    echo "wire-deployed: $name: aksResourceId is not the resource ID of a managed cluster" >&2
    failed=1
    continue
  fi
  subscription="${BASH_REMATCH[1]}" group="${BASH_REMATCH[2]}" cluster="${BASH_REMATCH[3]}"
  # While rotating, the function accepts "new,old" and the wiring presents the new one.
  jq -j --arg name "$name" '.[$name] // "" | split(",")[0] // ""' <<<"$secrets" > "$work/secret-$name"
  if [ ! -s "$work/secret-$name" ]; then
    echo "wire-deployed: $name has no secret in the members' secrets" >&2
    failed=1
    continue
  fi
  echo "wire-deployed: wiring $name ($cluster in $group)"
  kubeconfig="$work/kubeconfig-$name"
  # One member that cannot be wired does not keep the others from being wired; the script
  # fails at the end.
  if ! az aks get-credentials --subscription "$subscription" --resource-group "$group" --name "$cluster" \
      --file "$kubeconfig" --overwrite-existing --only-show-errors ||
    ! kubelogin convert-kubeconfig -l "$login_mode" --kubeconfig "$kubeconfig" ||
    ! KUBECONFIG="$kubeconfig" GMSA_CLUSTER_SECRET='' npm run --silent wire -- \
      --function-url "$WEBHOOK_BASE_URL" --mode "$WIRE_MODE" --identity "$IDENTITY_PRINCIPAL_ID" \
      --cluster "$name" --cluster-secret-file "$work/secret-$name" --apply "${check_args[@]}" "${key_args[@]}" "${policy_args[@]}"; then
    echo "wire-deployed: wiring or checking $name failed; the other members go on" >&2
    failed=1
  fi
done <<<"$rows"
exit "$failed"
