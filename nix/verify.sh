# `nix run .#verify -- BUNDLE [VERIFY-ARGS]`: `topp-gate verify`, on any of the flake's
# systems, with no torch in its closure. The exit code is `topp-gate verify`'s, passed
# through unchanged (its --help and docs/commands.md "Exit codes" say what each one means; 4 when
# verification fails, 2 for usage); with no arguments: this usage, exit 2.
#
# nix/apps.nix replaces the store path below; tests/unit/test_nix_wrappers.py does the same
# with its own path and runs it.
manifests="@manifests@"
if [ $# -eq 0 ]; then
  cat >&2 <<EOF
usage: nix run .#verify -- BUNDLE [--pubkey PUB] [--frozen-manifest MANIFEST] [--strict]
  Verifies BUNDLE offline: signature, schema, every sha256, the oracle and gate rerun.
  Without --pubkey it trusts this project's evidence key; pass the signer's .pub otherwise.
  The frozen manifests shipped with this flake, for --frozen-manifest:
    $manifests/h200-forced-logit-gate.json
    $manifests/smoke-interpreter.json
EOF
  exit 2
fi
exec topp-gate verify "$@"
