#!/usr/bin/env bash
# Install Debian's Nix (nix-bin, 2.8) and shellcheck for the flake's offline checks.
# Skips quietly when nix is already there; says why when it cannot install (not root).
set -euo pipefail
if command -v nix >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "nix is not installed and this is not a root Debian machine: the flake tests will skip"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq nix-bin shellcheck unzip >/dev/null
nix --version
