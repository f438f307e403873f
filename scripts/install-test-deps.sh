#!/usr/bin/env bash
# System packages the tests need beyond npm: nginx (the relay's software, run on loopback by the
# relay end-to-end test). Idempotent: returns at once when everything is there; refreshes the
# package lists only when a package cannot be found in them.
set -euo pipefail

packages=(nginx-light)
binaries=(nginx)

missing=()
for i in "${!binaries[@]}"; do
  if ! command -v "${binaries[$i]}" >/dev/null 2>&1 && [ ! -x "/usr/sbin/${binaries[$i]}" ]; then
    missing+=("${packages[$i]}")
  fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive

if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
  $sudo apt-get update -qq
fi

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
