#!/usr/bin/env bash
# Verify every committed evidence bundle (evidence/bundles/*) with the given topp-gate
# (the base install, no torch), and require each one's verified verdict to be the one
# recorded below. `topp-gate verify` exits 0 for a verified PASS, 1 for a verified STOP,
# 4 when verification fails, 2 on bad usage: here 1 is success when STOP is expected.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-topp-gate}

# bundle folder name -> the verdict its signed receipt holds (a new bundle needs a line)
declare -A expected=(
  [h200-forced-logit-gate-cuda-20261129]=STOP
  [h200-forced-logit-gate-cuda-20261129-run2]=STOP
  [smoke-interpreter-20261129]=STOP
)

shopt -s nullglob
bundles=(evidence/bundles/*/)
if [ ${#bundles[@]} -eq 0 ]; then
  echo "no committed bundles yet"
  exit 0
fi
for bundle in "${bundles[@]}"; do
  name=$(basename "$bundle")
  want=${expected[$name]:-}
  if [ -z "$want" ]; then
    echo "verify_committed: no expected verdict recorded for $name (add it above)" >&2
    exit 1
  fi
  set +e
  "$tool" verify "$bundle" --pubkey evidence/keys/topp-gate-evidence.pub
  rc=$?
  set -e
  case "$want:$rc" in
    PASS:0|STOP:1) echo "$name: verified, verdict $want as expected" ;;
    *) echo "verify_committed: $name: exit $rc, expected a verified $want" >&2; exit 1 ;;
  esac
done
