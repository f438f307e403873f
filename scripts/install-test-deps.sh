#!/usr/bin/env bash
# System packages the tests need beyond npm: nginx (the relay's software, run on loopback by the
# relay end-to-end test). Idempotent: returns at once when everything is there; refreshes the
# package lists only when a package cannot be found in them. Go (the local control plane) is the
# machine's own; the GitHub workflow sets it up from controlplane/kube/go.mod before running this.
set -euo pipefail

# Per binary, the packages that provide it, smallest first (Debian has nginx-light; Ubuntu's
# nginx is the same build).
packages=("nginx-light nginx")
binaries=(nginx)

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive

missing=()
refreshed=
for i in "${!binaries[@]}"; do
  if command -v "${binaries[$i]}" >/dev/null 2>&1 || [ -x "/usr/sbin/${binaries[$i]}" ]; then
    continue
  fi
  found=
  for attempt in 1 2; do
    for candidate in ${packages[$i]}; do
      if apt-cache show "$candidate" >/dev/null 2>&1; then
        found=$candidate
        break 2
      fi
    done
    [ -n "$refreshed" ] && break
    $sudo apt-get update -qq
    refreshed=1
  done
  [ -n "$found" ] || { echo "install-test-deps: no package provides ${binaries[$i]} (tried: ${packages[$i]})" >&2; exit 1; }
  missing+=("$found")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

# Packaged daemons must not start (nginx would take port 80): policy-rc.d says no while installing.
policy=/usr/sbin/policy-rc.d
created_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  created_policy=1
fi
trap '[ -n "$created_policy" ] && $sudo rm -f "$policy"' EXIT

$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"
