#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): mutation-test the gate with a frozen CUDA
# PR matrix (issue 20; MATRIX=pr-cuda-v3 by default, evidence/manifests/pr/$MATRIX.json). 'topp-gate mutate' runs the base (vLLM 0.33.0 against itself) and every
# mutant of the catalogue (topp-gate/mutants/v1) with --backend cuda, JOBS runs at once on the
# one GPU, verifies every bundle, computes vLLM's own batch count criterion beside the gate,
# and signs mutation.json with $KEY (scripts/device_common.sh: .carry/topp-gate-evidence-4.key).
# Carried in ignored folders (as scripts/device_sweep.sh):
#   .whl/    wheels the GPU image lacks (jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq)
#   .carry/  pr-sources.tar.xz ('topp-gate sources export DIR --pin evidence/pins/vllm-0.33.0.json'
#            as a tar.xz), topk_topp_sampler.py (vLLM 0.33.0's, sha256 a8234f8d...; the
#            criterion checks it) and the signing key ($KEY)
# Results in $OUT: mutate-$MATRIX.log, and the whole mutation folder as a tar in 15 MiB parts.
#
#   device run: bash scripts/device_mutate.sh   (carry: .whl .carry)
set -uo pipefail
JOBS=${JOBS:-10}
MATRIX=${MATRIX:-pr-cuda-v3}
# mutate is stopped at DEADLINE (epoch seconds; default 540 s from now), so the log (and
# whatever it wrote) always comes back within the call's 600 s
DEADLINE=${DEADLINE:-$(( $(date +%s) + 540 ))}
. scripts/device_common.sh
work=/tmp/mutate-$MATRIX
mkdir -p "$work/cache/trees"
# the cache 'manifest new' reads each mutant's pinned tree from: the exported 0.33.0 tree
tar -C "$work/cache/trees" -xJf .carry/pr-sources.tar.xz || exit 1
log=$OUT/mutate-$MATRIX.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  started=$(date +%s)
  TOPP_GATE_CACHE=$work/cache timeout "$(( DEADLINE - started ))" python3 -m harness mutate \
    --manifest "evidence/manifests/pr/$MATRIX.json" --backend cuda \
    --out "$work/$MATRIX-mutation" --key "$KEY" --sources "$work/cache/trees" \
    --jobs "$JOBS" --run-timeout "${RUN_TIMEOUT:-420}" --vllm-sampler .carry/topk_topp_sampler.py
  echo "mutate rc=$?"
  echo "== mutation took $(( $(date +%s) - started )) s"
  for f in "$work/$MATRIX-mutation"/logs/*.log; do echo "== $(basename "$f")"; grep -v '━' "$f" | tail -3; done
  du -sb "$work/$MATRIX-mutation"
} > "$log" 2>&1
[ -d "$work/$MATRIX-mutation" ] && device_tar "$MATRIX-mutation" "$work/$MATRIX-mutation" >> "$log"
date -u >> "$log"
