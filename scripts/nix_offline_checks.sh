#!/usr/bin/env bash
# The Nix checks that need no network and no GPU, as CI runs them (docs/nix.md).
# Needs Debian's nix-bin (Nix 2.8): apt-get install -y nix-bin. Run from anywhere.
#
#   scripts/nix_offline_checks.sh          # everything but the wheels and the wrapper run
#   scripts/nix_offline_checks.sh --sources  # also the pinned wheels (downloads ~650 MB once)
#                                            # and the first `nix run .#gate` run outside Nix
#                                            # (the smoke manifest in Triton's interpreter,
#                                            # 9.5 minutes measured on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
export NIX_CONFIG="experimental-features = nix-command flakes"
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3

nix --version
echo "== every .nix file parses"
for f in flake.nix $(find nix -name '*.nix' | sort); do
  nix-instantiate --parse "$f" >/dev/null
  echo "   ok $f"
done

offline=()
if unshare -n true 2>/dev/null; then offline=(unshare -n); fi
echo "== nix flake metadata, committed lock, ${offline[*]:-(--offline)}"
if [ ${#offline[@]} -gt 0 ]; then
  "${offline[@]}" nix flake metadata --no-write-lock-file .
else
  nix flake metadata --no-write-lock-file --offline .
fi

echo "== nix flake check --no-build against the stub nixpkgs"
if [ ${#offline[@]} -gt 0 ]; then
  "${offline[@]}" nix flake check --no-build --no-write-lock-file --override-input nixpkgs path:./nix/stub .
else
  nix flake check --no-build --no-write-lock-file --offline --override-input nixpkgs path:./nix/stub .
fi

echo "== the same and more as tests (outputs on the stub, pins, libcuda finder, wrappers)"
markers="not sources"
if [ "${1:-}" = "--sources" ]; then markers=""; fi
"$python" -m pytest -q -p no:cacheprovider -m "$markers" tests/unit/test_flake.py \
  tests/unit/test_nix_wrappers.py
