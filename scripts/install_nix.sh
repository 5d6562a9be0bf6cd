#!/usr/bin/env bash
# Install Debian's Nix (nix-bin, 2.8) and shellcheck for the flake's offline checks, and make
# sure the Nix store exists: Debian's package does not create /nix/store until a first Nix
# command, and the flake tests that need a store are skipped at collection when it is
# missing (a fresh CI machine would skip them silently). Skips the install when nix is
# already there; says why when it cannot install (not root).
#
# The flake's nixpkgs pin needs Nix >= 2.18 (nixpkgs' lib/minfeatures.nix); bookworm's 2.8
# is older. So, when the Nix on PATH is older than 2.18, Debian trixie's nix-bin (2.26.3 at
# the time of writing) is fetched from Debian's archive with apt-get download (its own
# package lists in a temporary folder, no change to this machine's apt sources) and
# unpacked with the trixie libraries it needs (glibc 2.41, libstdc++ 14, libgit2, ...) under
# $TOPP_GATE_NEWER_NIX_PREFIX (default /opt/topp-gate-nix); $PREFIX/bin/nix,
# nix-instantiate and nix-store run it through trixie's own ld.so, so nothing on the
# system is replaced. scripts/nix_offline_checks.sh runs the tier with both.
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

version=$(nix --version | awk '{print $NF}')
prefix=${TOPP_GATE_NEWER_NIX_PREFIX:-/opt/topp-gate-nix}
if [ "$(printf '%s\n2.18\n' "$version" | sort -V | head -n 1)" = 2.18 ]; then
  exit 0  # the Nix on PATH is new enough
fi
if [ -x "$prefix/bin/nix" ]; then
  "$prefix/bin/nix" --version
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! mkdir -p "$prefix" 2>/dev/null; then
  echo "install_nix: Nix $version is older than the pin needs (2.18) and $prefix cannot be made here: the offline tier runs with $version only"
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/topp-gate-trixie-nix.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
# the Debian mirror this machine's apt already uses (its main archive, not security), asked
# for the trixie suite
# shellcheck disable=SC2016  # apt's own format string, not the shell's
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null \
  | grep -v -- '-security' | head -n 1)
if [ -z "$mirror" ]; then
  echo "install_nix: no Debian archive in this machine's apt sources: the offline tier runs with Nix $version only"
  exit 0
fi
echo "deb ${mirror%/} trixie main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=/dev/null
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
mkdir -p "$work/cache/archives/partial"
apt-get "${apt_opts[@]}" -qq update
# nix-bin and the shared libraries it loads, recursively (perl, PAM, debconf and the like
# are for its maintainer scripts and the Perl bindings, not for `nix`)
libraries=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances nix-bin \
  | grep -E '^lib' | grep -vE 'perl|pam|debconf|debian-installer|newt|slang|textwrap|semanage|audit|systemd|db5' \
  | sort -u)
# shellcheck disable=SC2086  # one package name per word
(cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download nix-bin zlib1g $libraries)
mkdir -p "$prefix/root" "$prefix/bin"
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix/root"; done
libs="$prefix/root/usr/lib/x86_64-linux-gnu:$prefix/root/lib/x86_64-linux-gnu"
for name in nix nix-instantiate nix-store; do
  printf '#!/bin/sh\n# Debian trixie'"'"'s nix-bin, unpacked by scripts/install_nix.sh, on its own libraries\nexec "%s" --argv0 %s --library-path "%s" "%s" "$@"\n' \
    "$prefix/root/usr/lib64/ld-linux-x86-64.so.2" "$name" "$libs" "$prefix/root/usr/bin/nix" \
    > "$prefix/bin/$name"
  chmod +x "$prefix/bin/$name"
done
"$prefix/bin/nix" --version
