#!/usr/bin/env bash
# Verify every committed evidence bundle with the given topp-gate (the base install, no
# torch), each with the key that signed it, and require each verified verdict to be the one
# evidence/verdicts.tsv records. `topp-gate verify` exits 0 for a verified PASS, 1 for a
# verified STOP, 4 when verification fails, 2 on bad usage: here 1 is success when STOP is
# expected. A bundle folder with no line in the table fails, so none is skipped silently.
# Bundles are verified $VERIFY_JOBS at a time (default: one per CPU), each with one worker;
# each bundle's output is printed whole and in table order, and every failure is reported
# and fails the script. The key of each line must be a key file under evidence/keys/ (a
# relative path there, no `.`, `..` or empty component, no link leading out): an edited table
# must not choose the key a bundle is verified with. Any other key stops the script, naming
# the line, before anything is verified.
# In a source without nix/full-checkout (a `git archive` or GitHub tarball, such as what
# `nix run github:OWNER/topp-gate#verify` and `nix flake check github:...` fetch: .gitattributes
# export-ignores the evidence bulk and that file), a bundle the table names may be absent:
# one line says how many are not here to verify, and those present are verified as above.
# In a git clone every bundle the table names must be there.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-topp-gate}
table=evidence/verdicts.tsv
jobs=${VERIFY_JOBS:-$(nproc)}

keys=evidence/keys
keys_real=$(cd "$keys" 2> /dev/null && pwd -P) || keys_real=
# Is $1 a key file under $keys? (a regular file, not a link, whose folder resolves there)
key_file_under_keys() {
  local pub=$1 part folder
  local -a parts
  case "$pub" in "$keys"/?*) ;; *) return 1 ;; esac
  IFS=/ read -r -a parts <<< "$pub"
  for part in "${parts[@]}"; do
    case "$part" in '' | . | ..) return 1 ;; esac
  done
  case "$pub" in */) return 1 ;; esac
  [ -n "$keys_real" ] && [ -f "$pub" ] && [ ! -L "$pub" ] || return 1
  folder=$(cd "$(dirname -- "$pub")" && pwd -P) || return 1
  case "$folder/" in "$keys_real"/*) return 0 ;; *) return 1 ;; esac
}

declare -A want key
number=0
while IFS=$'\t' read -r path pub verdict; do
  number=$((number + 1))
  case "$path" in ''|'#'*) continue ;; esac
  if ! key_file_under_keys "$pub"; then
    echo "verify_committed: $table line $number ($path) names the key $pub, not a key file under $keys/" >&2
    exit 1
  fi
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
absent=0
for path in "${!want[@]}"; do
  [ -d "$path" ] && continue
  if [ -e nix/full-checkout ]; then
    echo "verify_committed: $table names $path, which is missing" >&2
    exit 1
  fi
  absent=$((absent + 1))
done
if [ "$absent" -ne 0 ]; then
  echo "verify_committed: no evidence bulk to verify here: $absent of ${#want[@]} bundles in $table are export-ignored (.gitattributes) and not in this source; verifying the ${#bundles[@]} it holds"
fi
# verify in the background, VERIFY_JOBS at a time: bundle i's output in $out/i.log, its
# exit code in $out/i.rc (written last, by rename, so a present .rc means a whole log)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# shellcheck disable=SC2016  # expanded by the inner sh, from its own arguments
one='"$0" verify "$2" --pubkey "$3" --workers 1 > "$OUT/$1.log" 2>&1; echo $? > "$OUT/$1.part"
     mv "$OUT/$1.part" "$OUT/$1.rc"'
for i in "${!bundles[@]}"; do
  path=${bundles[$i]%/}
  printf '%s %s %s\n' "$i" "$path" "${key[$path]}"
done | OUT=$out xargs -P "$jobs" -n 3 sh -c "$one" "$tool" &
launcher=$!
failed=0
for i in "${!bundles[@]}"; do
  path=${bundles[$i]%/}
  while [ ! -e "$out/$i.rc" ] && kill -0 "$launcher" 2> /dev/null; do sleep 0.2; done
  if [ ! -e "$out/$i.rc" ]; then
    echo "verify_committed: $path: no exit code (the verifying process did not finish)" >&2
    failed=$((failed + 1))
    continue
  fi
  cat "$out/$i.log"
  rc=$(cat "$out/$i.rc")
  case "${want[$path]}:$rc" in
    PASS:0|STOP:1) echo "$path: verified, verdict ${want[$path]} as expected" ;;
    *) echo "verify_committed: $path: exit $rc, expected a verified ${want[$path]}" >&2
       failed=$((failed + 1)) ;;
  esac
done
wait "$launcher" || true  # xargs exits non-zero when a verify did; each was judged above
if [ "$failed" -ne 0 ]; then
  echo "verify_committed: $failed of ${#bundles[@]} bundles failed" >&2
  exit 1
fi
echo "verify_committed: ${#bundles[@]} bundles verified"
