#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): issue 21's implementation gates. Every frozen
# manifest under evidence/manifests/impls/ (FlashInfer 0.7.2.post1, one per path: top-p-renorm,
# top-k-renorm, top-k-mask, top-p-sampling, top-k-top-p-sampling; vLLM 0.33.0's PyTorch sort
# path on CUDA) runs with --backend cuda, is signed with .carry/topp-gate-evidence-3.key and
# verified on the device. FlashInfer's sampling module is JIT-built with the machine's nvcc from
# the pinned sources on the first FlashInfer run (cached in /tmp/fi-workspace for the others
# and for a second call while the machine is warm). A run that fails records its stop in a
# complete, signed bundle; the script goes on with the next manifest. A manifest whose bundle
# already exists in /tmp/impls/bundles (an earlier call on the same warm machine) is skipped.
# Everything it needs is carried in ignored folders:
#   .whl/    wheels the GPU image lacks: jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq, and apache-tvm-ffi (cp312; FlashInfer's JIT binds
#            through it)
#   .carry/  impls-sources.tar.xz ('topp-gate sources export DIR --pin ...' of the FlashInfer
#            and vllm-pytorch pins, as a tar.xz) and topp-gate-evidence-3.key (public half:
#            evidence/keys/topp-gate-evidence-3.pub)
# Results in $OUT: impls.log (preflight, every run's and verify's output) and the bundles as
# one tar in 15 MiB parts (impls-bundles.tar.part-NN) with its sha256 in the log.
#
#   device run: bash scripts/device_flashinfer.sh   (carry: .whl .carry)
set -uo pipefail
OUT=${OUT:?set by the device tool}
RUN_TIMEOUT=${RUN_TIMEOUT:-560}  # seconds per manifest (the call's limit is 600 in all)
MANIFESTS=${MANIFESTS:-evidence/manifests/impls/*.json}
export TOPP_GATE_SOURCE_COMMIT=${TOPP_GATE_SOURCE_COMMIT:-} TOPP_GATE_SOURCE_CLEAN=${TOPP_GATE_SOURCE_CLEAN:-}
export GIT_DIR=/nonexistent-topp-gate-git  # the caller's claim is what receipts record
# one install of the carried wheels, shared by device scripts started side by side
flock /tmp/topp-gate-site.lock sh -c '[ -f /tmp/site/.installed ] || {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }' || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-workspace MAX_JOBS=${MAX_JOBS:-16}
chmod 600 .carry/topp-gate-evidence-3.key  # run refuses a key others may read
work=/tmp/impls
mkdir -p "$work/sources" "$work/bundles" "$FLASHINFER_WORKSPACE_BASE"
[ -n "$(ls -A "$work/sources")" ] || tar -C "$work/sources" -xJf .carry/impls-sources.tar.xz || exit 1
log=$OUT/impls.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  command -v nvcc && nvcc --version | tail -2; command -v ninja && ninja --version
  python3 -c 'import tvm_ffi, filelock, pynvml, packaging; print("tvm_ffi", tvm_ffi.__version__)'
} >> "$log" 2>&1
for manifest in $MANIFESTS; do
  name=$(basename "$manifest" .json)
  bundle=$work/bundles/$name-cuda
  [ -d "$bundle" ] && { echo "== $name: bundle exists, skipped" >> "$log"; continue; }
  echo "== $name ($(date -u +%T))" >> "$log"
  timeout "$RUN_TIMEOUT" python3 -m harness run --manifest "$manifest" --out "$bundle" \
    --key .carry/topp-gate-evidence-3.key --sources "$work/sources" >> "$log" 2>&1
  echo "run rc=$? (0 PASS, 1 STOP, 2 refused, 124 timeout)" >> "$log"
  if [ -d "$bundle" ]; then
    python3 -m harness verify "$bundle" --pubkey evidence/keys/topp-gate-evidence-3.pub \
      --frozen-manifest "$manifest" >> "$log" 2>&1
    echo "verify rc=$? (0 verified PASS, 1 verified STOP, 4 refused)" >> "$log"
  fi
done
if [ -n "$(ls -A "$work/bundles")" ]; then
  # files ordered by their path inside a bundle, so the identical captured inputs of
  # several bundles sit side by side and xz stores them once
  (cd "$work/bundles" && find . -type f | LC_ALL=C sort -t/ -k3 -k2 \
    | tar -cf - --no-recursion -T -) | xz -T0 -6 > /tmp/impls-bundles.tar.xz
  sha256sum /tmp/impls-bundles.tar.xz >> "$log"
  split -b 15M -d /tmp/impls-bundles.tar.xz "$OUT/impls-bundles.tar.xz.part-"
fi
# the JIT's build log, when a FlashInfer run could not build (the reason, for the report)
find "$FLASHINFER_WORKSPACE_BASE" -name '*.log' -size -2M -exec tail -n 40 {} + >> "$log" 2>/dev/null
date -u >> "$log"
ls -la "$OUT"
