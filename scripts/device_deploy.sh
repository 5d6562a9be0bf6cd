#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): the frozen deployment matrix (issue 19
# item 5). The four manifests under evidence/manifests/deploy/ (0.33.0 against itself, and
# 0.30.0, 0.31.0, 0.32.0 as stock against 0.33.0 as patched; every case on the path vLLM's
# V2 sampler takes on CUDA, named per case in the manifest) run at once on the one GPU with
# --backend cuda, are signed with $KEY (scripts/device_common.sh; the committed bundles of
# 2026-12-01 were signed with .carry/topp-gate-evidence-3.key: KEY=that PUB=its .pub) and
# verified on the device against their frozen manifests. Everything it needs is carried in ignored
# folders:
#   .whl/    wheels the GPU image lacks for cp312 (jsonschema and its deps, cryptography,
#            cffi, pycparser, rfc8785, pyzmq): the sweep's folder, about 6.2 MB
#   .carry/  deploy-sources.tar.xz ('topp-gate sources export DIR --pin ...' of the four
#            pins, as a tar.xz, about 0.2 MB) and the signing key ($KEY; its public half
#            is committed under evidence/keys/, $PUB)
# Results in $OUT: deploy.log (every run's and verify's output, in release order) and the
# bundles as one tar in 15 MiB parts (4 bundles of about 12-13 MB each: 4 parts, under the
# tool's 8 files and 64 MiB).
#
#   device run: bash scripts/device_deploy.sh   (carry: .whl .carry)
set -uo pipefail
JOBS=${JOBS:-4}                  # all four releases at once on the one GPU
RUN_TIMEOUT=${RUN_TIMEOUT:-540}  # seconds per release (run), the call's limit is 600
PUB=${PUB:-evidence/keys/topp-gate-evidence-4.pub}
. scripts/device_common.sh
export RUN_TIMEOUT KEY PUB
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
      --out "$bundle" --key "$KEY" --sources "$work/sources" \
      --workers 3 2>&1 | grep -v '━'
    echo "run rc=${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s)"
    if [ -d "$bundle" ]; then
      python3 -m harness verify "$bundle" --pubkey "$PUB" \
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
ls "$work/bundles"/* > /dev/null 2>&1 && device_tar deploy-bundles "$work/bundles" >> "$log"
date -u >> "$log"
