#!/usr/bin/env bash
# Verify every committed evidence bundle with the given topp-gate (the base install, no
# torch), each with the key that signed it, and require each verified verdict to be the one
# evidence/verdicts.tsv records. `topp-gate verify` exits 0 for a verified PASS, 1 for a
# verified STOP, 4 when verification fails, 2 on bad usage: here 1 is success when STOP is
# expected. A bundle folder with no line in the table fails, so none is skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-topp-gate}
table=evidence/verdicts.tsv

declare -A want key
while IFS=$'\t' read -r path pub verdict; do
  case "$path" in ''|'#'*) continue ;; esac
  want[$path]=$verdict
  key[$path]=$pub
done < "$table"

shopt -s nullglob
bundles=(evidence/bundles/*/ evidence/sweep/bundles/*/ evidence/impls/bundles/*/ evidence/deploy/bundles/*/)
for bundle in "${bundles[@]}"; do
  path=${bundle%/}
  if [ -z "${want[$path]:-}" ]; then
    echo "verify_committed: $path has no line in $table (path, public key, verdict)" >&2
    exit 1
  fi
done
for path in "${!want[@]}"; do
  [ -d "$path" ] || { echo "verify_committed: $table names $path, which is missing" >&2; exit 1; }
done
for bundle in "${bundles[@]}"; do
  path=${bundle%/}
  set +e
  "$tool" verify "$path" --pubkey "${key[$path]}"
  rc=$?
  set -e
  case "${want[$path]}:$rc" in
    PASS:0|STOP:1) echo "$path: verified, verdict ${want[$path]} as expected" ;;
    *) echo "verify_committed: $path: exit $rc, expected a verified ${want[$path]}" >&2; exit 1 ;;
  esac
done
echo "verify_committed: ${#bundles[@]} bundles verified"
