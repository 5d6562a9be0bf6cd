#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): the frozen deployment matrix (issue 19
# item 5). The four manifests under evidence/manifests/deploy/ (0.33.0 against itself, and
# 0.30.0, 0.31.0, 0.32.0 as stock against 0.33.0 as patched; every case on the path vLLM's
# V2 sampler takes on CUDA, named per case in the manifest) run at once on the one GPU with
# --backend cuda, are signed with the key at .carry/topp-gate-evidence-3.key and verified
# on the device against their frozen manifests. Everything it needs is carried in ignored
# folders:
#   .whl/    wheels the GPU image lacks for cp312 (jsonschema and its deps, cryptography,
#            cffi, pycparser, rfc8785, pyzmq): the sweep's folder, about 6.2 MB
#   .carry/  deploy-sources.tar.xz ('topp-gate sources export DIR --pin ...' of the four
#            pins, as a tar.xz, about 0.2 MB) and the signing key topp-gate-evidence-3.key
#            (its public half is committed: evidence/keys/topp-gate-evidence-3.pub)
# Results in $OUT: deploy.log (every run's and verify's output, in release order) and the
# bundles as one tar in 15 MiB parts (4 bundles of about 12-13 MB each: 4 parts, under the
# tool's 8 files and 64 MiB).
#
#   device run: bash scripts/device_deploy.sh   (carry: .whl .carry)
set -uo pipefail
OUT=${OUT:?set by the device tool}
JOBS=${JOBS:-4}                  # all four releases at once on the one GPU
RUN_TIMEOUT=${RUN_TIMEOUT:-540}  # seconds per release (run), the call's limit is 600
export TOPP_GATE_SOURCE_COMMIT=${TOPP_GATE_SOURCE_COMMIT:-} TOPP_GATE_SOURCE_CLEAN=${TOPP_GATE_SOURCE_CLEAN:-}
# A .git the device's copy may hold is not this tree's history: make git fail there, so the
# caller's claim (TOPP_GATE_SOURCE_COMMIT) is what every receipt records.
export GIT_DIR=/nonexistent-topp-gate-git
# one install of the carried wheels, shared by device scripts started side by side
flock /tmp/topp-gate-site.lock sh -c '[ -f /tmp/site/.installed ] || {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }' || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
export RUN_TIMEOUT
chmod 600 .carry/topp-gate-evidence-3.key  # run refuses a key others may read
work=/tmp/deploy
mkdir -p "$work/sources" "$work/bundles" "$work/logs"
tar -C "$work/sources" -xJf .carry/deploy-sources.tar.xz || exit 1
log=$OUT/deploy.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  echo "== deployment matrix (issue 19): $(ls evidence/manifests/deploy/*.json | wc -l) manifests, $JOBS at once"
} > "$log" 2>&1

run_one() {  # MANIFEST: run, then verify against the frozen manifest; never stops the others
  local manifest=$1 name
  name=$(basename "$manifest" .json)
  local bundle=$work/bundles/$name-cuda out=$work/logs/$name.log
  {
    echo "== $name"
    local t0=$(date +%s)
    timeout "$RUN_TIMEOUT" python3 -m harness run --manifest "$manifest" --backend cuda \
      --out "$bundle" --key .carry/topp-gate-evidence-3.key --sources "$work/sources" \
      --workers 3 2>&1 | grep -v '━'
    echo "run rc=${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s)"
    if [ -d "$bundle" ]; then
      python3 -m harness verify "$bundle" --pubkey evidence/keys/topp-gate-evidence-3.pub \
        --frozen-manifest "$manifest" --workers 3 2>&1 | grep -v '━'
      echo "verify rc=${PIPESTATUS[0]}"
      du -sb "$bundle" | cut -f1 | sed 's/^/bundle bytes /'
    else
      echo "no bundle"
    fi
  } > "$out" 2>&1
}
export -f run_one
export work
started=$(date +%s)
ls evidence/manifests/deploy/*.json | sort -V | xargs -P "$JOBS" -I{} bash -c 'run_one "$1"' _ {}
for manifest in $(ls evidence/manifests/deploy/*.json | sort -V); do
  cat "$work/logs/$(basename "$manifest" .json).log" >> "$log" 2>/dev/null
done
echo "== deployment matrix took $(( $(date +%s) - started )) s" >> "$log"
if ls "$work/bundles"/* > /dev/null 2>&1; then
  # files ordered by their path inside a bundle, so the identical captured inputs of
  # several bundles sit side by side and xz stores them once
  (cd "$work/bundles" && find . -type f | LC_ALL=C sort -t/ -k3 -k2 \
    | tar -cf - --no-recursion -T -) | xz -T0 -6 > /tmp/deploy-bundles.tar.xz
  sha256sum /tmp/deploy-bundles.tar.xz >> "$log"
  split -b 15M -d /tmp/deploy-bundles.tar.xz "$OUT/deploy-bundles.tar.xz.part-"
fi
date -u >> "$log"
