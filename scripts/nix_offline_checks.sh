#!/usr/bin/env bash
# The Nix checks that need no network and no GPU, as CI runs them (docs/nix.md).
# Needs Debian's nix-bin (Nix 2.8): apt-get install -y nix-bin. Run from anywhere.
#
#   scripts/nix_offline_checks.sh          # everything but the wheels and the wrapper run
#   scripts/nix_offline_checks.sh --sources  # also the pinned wheels (downloads ~650 MB once)
#                                            # and the first `nix run .#gate` run outside Nix
#                                            # (the smoke manifest in Triton's interpreter,
#                                            # 9.5 minutes measured on 2 cores)
#   scripts/nix_offline_checks.sh --nix-only # the Nix steps only, no pytest
# `nix flake metadata` and `nix flake check` run against a fresh, empty store in a temporary
# folder (--store DIR), so the tier cannot pass only because earlier commands filled
# /nix/store (issue 28). Run from anywhere; it checks the tree it sits in.
#
# The flake's nixpkgs pin needs Nix >= 2.18 (nixpkgs' lib/minfeatures.nix), bookworm's is
# 2.8: the Nix steps run with the nix on PATH and again with the newer one that
# scripts/install_nix.sh unpacks from Debian trixie ($TOPP_GATE_NEWER_NIX_PREFIX/bin, default
# /opt/topp-gate-nix/bin), with --all-systems there. Without one, a line says that only the
# old Nix ran; TOPP_GATE_REQUIRE_NEWER_NIX=1 makes that a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
if [ -z "${TOPP_GATE_NIX_TIER_PASS:-}" ]; then
  # what `nix run github:OWNER/topp-gate#...` downloads: GitHub's tarball, made as
  # `git archive` makes it (.gitattributes export-ignores the evidence bulk; docs/nix.md)
  if git rev-parse --verify -q HEAD > /dev/null 2>&1; then
    size=$(git archive --format=tar HEAD | wc -c)
    echo "== the flake source a github: reference fetches (git archive HEAD): $size bytes ($((size / 1048576)) MiB; limit 64 MiB)"
    if [ "$size" -gt $((64 * 1048576)) ]; then
      echo "nix_offline_checks: git archive HEAD is over 64 MiB: export-ignore the bulk in .gitattributes" >&2
      exit 1
    fi
  fi
  newer=${TOPP_GATE_NEWER_NIX_PREFIX:-/opt/topp-gate-nix}/bin
  old_version=$(nix --version | awk '{print $NF}')
  if [ "$(printf '%s\n2.18\n' "$old_version" | sort -V | head -n 1)" = 2.18 ]; then
    echo "== nix $old_version on PATH is one the pin supports (>= 2.18)"
    TOPP_GATE_NIX_TIER_PASS=newer bash "$0" --nix-only
  elif ! TOPP_GATE_NIX_TIER_PASS=old bash "$0" --nix-only; then
    exit 1
  elif [ -x "$newer/nix" ]; then
    echo "== the same Nix steps with $("$newer/nix" --version) ($newer), a Nix the pin supports (>= 2.18)"
    PATH="$newer:$PATH" TOPP_GATE_NIX_TIER_PASS=newer bash "$0" --nix-only
  else
    echo "nix_offline_checks: only Nix $old_version ran; the pin needs >= 2.18 and $newer has none (scripts/install_nix.sh unpacks Debian trixie's there)" >&2
    [ -z "${TOPP_GATE_REQUIRE_NEWER_NIX:-}" ] || exit 1
  fi
  [ "$mode" = --nix-only ] && exit 0
  TOPP_GATE_NIX_TIER_PASS=tests
fi
store=$(mktemp -d "${TMPDIR:-/tmp}/topp-gate-nix-store.XXXXXX")
trap 'chmod -R u+w "$store" 2>/dev/null; rm -rf "$store"' EXIT
export NIX_CONFIG="experimental-features = nix-command flakes"
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3

if [ "$TOPP_GATE_NIX_TIER_PASS" != tests ]; then
nix --version
all_systems=()
if [ "$TOPP_GATE_NIX_TIER_PASS" = newer ]; then all_systems=(--all-systems); fi
echo "== every .nix file parses"
for f in flake.nix $(find nix -name '*.nix' | sort); do
  nix-instantiate --parse "$f" >/dev/null
  echo "   ok $f"
done

echo "== every nixpkgs attribute path nix/stub offers is in nix/stub/nixpkgs-attributes.txt"
checked=$(nix-instantiate --eval --strict -E 'import ./nix/stub/attributes.nix { }')
echo "   $checked paths, all listed"

offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi
echo "== nix flake metadata, committed lock, ${offline[*]:-(--offline)}, empty store $store"
if [ ${#offline[@]} -gt 0 ]; then
  "${offline[@]}" nix --store "$store" flake metadata --no-write-lock-file .
else
  nix --store "$store" flake metadata --no-write-lock-file --offline .
fi

echo "== nix flake check --no-build against the stub nixpkgs, the same empty store"
if [ ${#offline[@]} -gt 0 ]; then
  "${offline[@]}" nix --store "$store" flake check --no-build "${all_systems[@]}" --no-write-lock-file --override-input nixpkgs path:./nix/stub .
else
  nix --store "$store" flake check --no-build "${all_systems[@]}" --no-write-lock-file --offline --override-input nixpkgs path:./nix/stub .
fi

echo "== the package's source (lib.fileset) on the same empty store holds pyproject.toml and harness/"
eval_src=(nix --store "$store" eval --raw --no-write-lock-file --override-input nixpkgs path:./nix/stub
  .#packages.x86_64-linux.topp-gate.src)
if [ ${#offline[@]} -gt 0 ]; then src=$("${offline[@]}" "${eval_src[@]}"); else src=$("${eval_src[@]}" --offline); fi
for f in pyproject.toml harness/__init__.py harness/cli.py; do
  [ -f "$store$src/$f" ] || { echo "nix_offline_checks: the package source $src has no $f" >&2; exit 1; }
done
echo "   $src: $(find "$store$src" -type f | wc -l) files, pyproject.toml and harness/ among them"

exit 0
fi
echo "== the same and more as tests (outputs on the stub, pins, libcuda finder, wrappers)"
markers="not sources"
if [ "$mode" = "--sources" ]; then markers=""; fi
"$python" -m pytest -q -p no:cacheprovider -m "$markers" tests/unit/test_flake.py \
  tests/unit/test_nix_wrappers.py
