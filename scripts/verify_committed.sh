#!/usr/bin/env bash
# Verify every committed evidence bundle (evidence/bundles/*, evidence/sweep/bundles/*) with the given topp-gate
# (the base install, no torch). Each bundle names its signing key in evidence/keys/.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-topp-gate}
shopt -s nullglob
bundles=(evidence/bundles/*/ evidence/sweep/bundles/*/)
if [ ${#bundles[@]} -eq 0 ]; then
  echo "no committed bundles yet"
  exit 0
fi
for bundle in "${bundles[@]}"; do
  "$tool" verify "$bundle" --pubkey evidence/keys/topp-gate-evidence.pub
done
