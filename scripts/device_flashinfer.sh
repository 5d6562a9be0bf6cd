#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): issue 21's implementation gates. Every frozen
# manifest under evidence/manifests/impls/ (FlashInfer 0.7.2.post1, one per path: top-p-renorm,
# top-k-renorm, top-k-mask, top-p-sampling, top-k-top-p-sampling; vLLM 0.33.0's PyTorch sort
# path on CUDA) runs with --backend cuda, one after another, is signed with $KEY
# (scripts/device_common.sh) and verified on the device. FlashInfer's sampling module is
# JIT-built with the machine's nvcc from
# the pinned sources on the first FlashInfer run, once: the family's stable private copy keeps
# the same paths and times, so every later child finds ninja's build in /tmp/fi-workspace up
# to date (a second call while the machine is warm too). A run that fails records its stop in a
# complete, signed bundle; the script goes on with the next manifest. A manifest whose bundle
# already exists in /tmp/impls/bundles (an earlier call on the same warm machine) is skipped.
# Everything it needs is carried in ignored folders:
#   .whl/    wheels the GPU image lacks: jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq, and apache-tvm-ffi (cp312; FlashInfer's JIT binds
#            through it)
#   .carry/  impls-sources.tar.xz ('topp-gate sources export DIR --pin ...' of the FlashInfer
#            and vllm-pytorch pins, as a tar.xz) and the signing key ($KEY)
# Results in $OUT: impls.log (preflight, every run's and verify's output) and the bundles as
# one tar.xz in 15 MiB parts (impls-bundles.tar.xz.part-NN) with its sha256 in the log.
#
#   device run: bash scripts/device_flashinfer.sh   (carry: .whl .carry)
set -uo pipefail
RUN_TIMEOUT=${RUN_TIMEOUT:-560}  # seconds per manifest (the call's limit is 600 in all)
# no manifest starts after DEADLINE (epoch seconds; default: RUN_TIMEOUT from now), and none
# runs past it, so the bundles already made are always packed and come back
DEADLINE=${DEADLINE:-$(( $(date +%s) + RUN_TIMEOUT ))}
MANIFESTS=${MANIFESTS:-evidence/manifests/impls/*.json}
WORK=${WORK:-/tmp/impls}  # another WORK (and OUT) lets two chains run side by side
PUB=${PUB:-evidence/keys/topp-gate-evidence-4.pub}
. scripts/device_common.sh
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-workspace MAX_JOBS=${MAX_JOBS:-16}
work=$WORK
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
  left=$(( DEADLINE - $(date +%s) ))
  [ "$left" -ge 60 ] || { echo "== $name: not started, ${left} s before the deadline" >> "$log"; continue; }
  echo "== $name ($(date -u +%T), $(( left < RUN_TIMEOUT ? left : RUN_TIMEOUT )) s at most)" >> "$log"
  timeout "$(( left < RUN_TIMEOUT ? left : RUN_TIMEOUT ))" python3 -m harness run --manifest "$manifest" --out "$bundle" \
    --key "$KEY" --sources "$work/sources" >> "$log" 2>&1
  echo "run rc=$? (0 PASS, 1 STOP, 2 refused, 124 timeout)" >> "$log"
  if [ -d "$bundle" ]; then
    python3 -m harness verify "$bundle" --pubkey "$PUB" --frozen-manifest "$manifest" >> "$log" 2>&1
    echo "verify rc=$? (0 verified PASS, 1 verified STOP, 4 refused)" >> "$log"
  fi
done
[ -n "$(ls -A "$work/bundles")" ] && device_tar impls-bundles "$work/bundles" >> "$log"
# the JIT's build log, when a FlashInfer run could not build (the reason, for the report)
find "$FLASHINFER_WORKSPACE_BASE" -name '*.log' -size -2M -exec tail -n 40 {} + >> "$log" 2>/dev/null
date -u >> "$log"
ls -la "$OUT"
