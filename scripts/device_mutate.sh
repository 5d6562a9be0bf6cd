#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): mutation-test the gate with the frozen CUDA
# PR matrix (issue 20). 'topp-gate mutate' runs the base (vLLM 0.33.0 against itself) and every
# mutant of the catalogue (topp-gate/mutants/v1) with --backend cuda, JOBS runs at once on the
# one GPU, verifies every bundle, computes vLLM's own batch count criterion beside the gate,
# and signs mutation.json with the key at .carry/topp-gate-evidence-3.key.
# Carried in ignored folders (as scripts/device_sweep.sh):
#   .whl/    wheels the GPU image lacks (jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq)
#   .carry/  pr-sources.tar.xz ('topp-gate sources export DIR --pin evidence/pins/vllm-0.33.0.json'
#            as a tar.xz), topk_topp_sampler.py (vLLM 0.33.0's, sha256 a8234f8d...; the
#            criterion checks it) and the signing key topp-gate-evidence-3.key
# Results in $OUT: mutate.log, and the whole mutation folder as a tar in 15 MiB parts.
#
#   device run: bash scripts/device_mutate.sh   (carry: .whl .carry)
set -uo pipefail
OUT=${OUT:?set by the device tool}
JOBS=${JOBS:-10}
export TOPP_GATE_SOURCE_COMMIT=${TOPP_GATE_SOURCE_COMMIT:-} TOPP_GATE_SOURCE_CLEAN=${TOPP_GATE_SOURCE_CLEAN:-}
export GIT_DIR=/nonexistent-topp-gate-git
# one install of the carried wheels, shared by device scripts started side by side
flock /tmp/topp-gate-site.lock sh -c '[ -f /tmp/site/.installed ] || {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }' || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
chmod 600 .carry/topp-gate-evidence-3.key
work=/tmp/mutate
mkdir -p "$work/sources"
tar -C "$work/sources" -xJf .carry/pr-sources.tar.xz || exit 1
log=$OUT/mutate.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  started=$(date +%s)
  python3 -m harness mutate --manifest evidence/manifests/pr/pr-cuda.json --backend cuda \
    --out "$work/pr-cuda-mutation" --key .carry/topp-gate-evidence-3.key \
    --sources "$work/sources" --jobs "$JOBS" --run-timeout 420 \
    --vllm-sampler .carry/topk_topp_sampler.py
  echo "mutate rc=$?"
  echo "== mutation took $(( $(date +%s) - started )) s"
  for f in "$work"/pr-cuda-mutation/logs/*.log; do echo "== $(basename "$f")"; grep -v '━' "$f" | tail -3; done
  du -sb "$work/pr-cuda-mutation"
} > "$log" 2>&1
if [ -d "$work/pr-cuda-mutation" ]; then
  # files ordered by their path inside a bundle, so the identical captured inputs of
  # several bundles sit side by side and xz stores them once
  (cd "$work" && find pr-cuda-mutation -type f | LC_ALL=C sort -t/ -k3 -k2 \
    | tar -cf - --no-recursion -T -) | xz -T0 -6 > /tmp/pr-cuda-mutation.tar.xz
  sha256sum /tmp/pr-cuda-mutation.tar.xz >> "$log"
  split -b 15M -d /tmp/pr-cuda-mutation.tar.xz "$OUT/pr-cuda-mutation.tar.xz.part-"
fi
date -u >> "$log"
ls -la "$OUT"
