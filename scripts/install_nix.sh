#!/usr/bin/env bash
# Install Debian's Nix (nix-bin, 2.8) and shellcheck for the flake's offline checks, and make
# sure the Nix store exists: Debian's package does not create /nix/store until a first Nix
# command, and the flake tests that need a store are skipped at collection when it is
# missing (a fresh CI machine would skip them silently). Skips the install when nix is
# already there; says why when it cannot install (not root).
set -euo pipefail
if ! command -v nix >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "nix is not installed and this is not a root Debian machine: the flake tests will skip"
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nix-bin shellcheck unzip >/dev/null
fi
if [ ! -d /nix/store ] && [ "$(id -u)" -eq 0 ]; then
  nix-store --init
fi
nix --version
