#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): the frozen release sweep (issue 10).
# Every manifest under evidence/manifests/sweep/ (a release 0.17.0 ... 0.32.0 as stock on the
# path it takes on CUDA, against 0.33.0 as patched) runs with --backend cuda, is signed with
# the key at .carry/topp-gate-evidence-2.key and verified on the device against its frozen
# manifest. A release whose kernel cannot run with the machine's torch and Triton records
# kernel_crash in a complete, signed bundle; the sweep goes on with the next release.
# Everything it needs is carried in ignored folders:
#   .whl/    wheels the GPU image lacks (jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq)
#   .carry/  sweep-sources.tar.xz ('topp-gate sources export DIR --pin ...' of every pin
#            the sweep names, as a tar.xz) and the signing key, topp-gate-evidence-2.key
#            (its public half is committed: evidence/keys/topp-gate-evidence-2.pub)
# Results in $OUT (the tool returns at most 8 files of 16 MiB and 64 MiB in all): sweep.log
# (every run's and verify's output, in release order) and the bundles as one tar in 15 MiB
# parts. The 24 bundles make about 72 MB, so the last part stays behind: fetch it with a
# second call while the machine is warm:
#   tail -c +62914561 /tmp/sweep-bundles.tar > $OUT/sweep-bundles.tar.part-04
#
#   device run: bash scripts/device_sweep.sh   (carry: .whl .carry)
set -uo pipefail
OUT=${OUT:?set by the device tool}
JOBS=${JOBS:-8}                  # runs at once on the one GPU (16 CPU cores)
RUN_TIMEOUT=${RUN_TIMEOUT:-400}  # seconds per release (run), the call's limit is 600
# The working tree carries no .git: the caller names the commit it was copied from
# (TOPP_GATE_SOURCE_COMMIT, TOPP_GATE_SOURCE_CLEAN), which every receipt records as a claim.
export TOPP_GATE_SOURCE_COMMIT=${TOPP_GATE_SOURCE_COMMIT:-} TOPP_GATE_SOURCE_CLEAN=${TOPP_GATE_SOURCE_CLEAN:-}
# A .git the device's copy may hold is not this tree's history (seen: it named the session's
# first commit, dirty): make git fail there, so the caller's claim is what gets recorded.
export GIT_DIR=/nonexistent-topp-gate-git
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
export RUN_TIMEOUT
chmod 600 .carry/topp-gate-evidence-2.key  # run refuses a key others may read
work=/tmp/sweep
mkdir -p "$work/sources" "$work/bundles" "$work/logs"
tar -C "$work/sources" -xJf .carry/sweep-sources.tar.xz || exit 1
log=$OUT/sweep.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  echo "== release sweep (issue 10): $(ls evidence/manifests/sweep/*.json | wc -l) manifests, $JOBS at once"
} > "$log" 2>&1

run_one() {  # MANIFEST: run, then verify against the frozen manifest; never stops the sweep
  local manifest=$1 name
  name=$(basename "$manifest" .json)
  local bundle=$work/bundles/$name-cuda out=$work/logs/$name.log
  {
    echo "== $name"
    timeout "$RUN_TIMEOUT" python3 -m harness run --manifest "$manifest" --backend cuda \
      --out "$bundle" --key .carry/topp-gate-evidence-2.key --sources "$work/sources" \
      --workers 2 2>&1 | grep -v '━'
    echo "run rc=${PIPESTATUS[0]}"
    if [ -d "$bundle" ]; then
      python3 -m harness verify "$bundle" --pubkey evidence/keys/topp-gate-evidence-2.pub \
        --frozen-manifest "$manifest" --workers 2 2>&1 | grep -v '━'
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
ls evidence/manifests/sweep/*.json | sort -V | xargs -P "$JOBS" -I{} bash -c 'run_one "$1"' _ {}
for manifest in $(ls evidence/manifests/sweep/*.json | sort -V); do
  cat "$work/logs/$(basename "$manifest" .json).log" >> "$log" 2>/dev/null
done
echo "== sweep took $(( $(date +%s) - started )) s" >> "$log"
if ls "$work/bundles"/* > /dev/null 2>&1; then
  tar -C "$work/bundles" -cf /tmp/sweep-bundles.tar .
  sha256sum /tmp/sweep-bundles.tar >> "$log"
  split -b 15M -d /tmp/sweep-bundles.tar "$OUT/sweep-bundles.tar.part-"
fi
date -u >> "$log"
ls -la "$OUT"
