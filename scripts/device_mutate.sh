#!/usr/bin/env bash
# One or two calls on the lent NVIDIA H200 (no network): mutation-test the gate with a frozen
# CUDA PR matrix (MATRIX=pr-cuda-v4 by default, evidence/manifests/pr/$MATRIX.json) and a
# mutant catalogue (CATALOGUE=topp-gate/mutants/v2 by default). 'topp-gate mutate' runs the
# base (vLLM 0.33.0 against itself) and every mutant with --backend cuda, JOBS runs at once on
# the one GPU, verifies every bundle as its run ends, computes vLLM's own batch count
# criterion beside the gate, and signs mutation.json with $KEY (scripts/device_common.sh).
# Carried in ignored folders:
#   .whl/    wheels the GPU image lacks (jsonschema and its deps, cryptography, cffi,
#            pycparser, rfc8785, pyzmq)
#   .carry/  pr-sources.tar.xz ('topp-gate sources export DIR --pin evidence/pins/vllm-0.33.0.json'
#            as a tar.xz; another matrix's pin: SOURCES_TAR=.carry/pt-sources.tar.xz for
#            vllm-pytorch-0.33.0.json with CATALOGUE=topp-gate/mutants/pytorch-v1), topk_topp_sampler.py (vLLM 0.33.0's, sha256 a8234f8d...; the
#            criterion checks it) and the signing key ($KEY)
# FlashInfer (issue 39): MATRIX=pr-flashinfer-v2 CATALOGUE=topp-gate/mutants/flashinfer-v1
# SOURCES_TAR=.carry/fi072-sources.tar.xz CRITERION=--no-vllm-criterion (vLLM's batch count
# criterion compares kept counts with vLLM's PyTorch top-k/top-p; a sampler's draws are not
# that) JOBS=5: every mutant changes a header, so its tree and stable private copy are its own
# and its child JIT-builds the sampling module with nvcc (100 to 156 s alone on an H200 with
# 16 jobs; MAX_JOBS, default 3 here, nvcc processes a build, 5 builds at once on 16 cores);
# the matrix's child timeout (360 s) covers one build plus the cases. Run
# scripts/device_fi_mutants_build.sh with the same RUN first: it builds every module into the
# stable copies' build folders this run then finds up to date, so the mutants run cases only.
# FLASHINFER_* never reaches a child (the runner removes it; the child sets its own
# FLASHINFER_WORKSPACE_BASE to the stable copy's build folder under $work/cache).
# A run longer than one call: DETACH=1 starts mutate in its own process session (it outlives
# the call while the machine stays warm) and waits for it until DEADLINE; a later call with
# FINISH=1 waits for the same run and packs it. Results in $OUT: mutate-$MATRIX.log, and the
# whole mutation folder as a tar.xz in 15 MiB parts.
#
#   device run: bash scripts/device_mutate.sh   (carry: .whl .carry)
set -uo pipefail
JOBS=${JOBS:-10}
MATRIX=${MATRIX:-pr-cuda-v4}
CATALOGUE=${CATALOGUE:-topp-gate/mutants/v2}
ONLY=${ONLY:-}  # a comma-separated subset of the catalogue (mutate --only), or all of it
# RUN names one mutation run's work folder, log and archive, so two runs of the same matrix on
# one warm machine (one after the other, each over several calls) never share a folder
RUN=${RUN:-$MATRIX}
# the call waits for mutate until DEADLINE (epoch seconds; default 540 s from now), so the log
# (and whatever it wrote) always comes back within the call's 600 s
DEADLINE=${DEADLINE:-$(( $(date +%s) + 540 ))}
# vLLM's criterion (the Triton and PyTorch matrices) or --no-vllm-criterion (FlashInfer)
CRITERION=${CRITERION:---vllm-sampler .carry/topk_topp_sampler.py}
. scripts/device_common.sh
export MAX_JOBS=${MAX_JOBS:-3}  # nvcc processes of one FlashInfer JIT build (ninja -j)
work=/tmp/mutate-$RUN
log=$OUT/mutate-$RUN.log
if [ -z "${FINISH:-}" ]; then
  mkdir -p "$work/cache/trees" "$work/src"
  # the run works from its own copy of this call's tree: a later call (FINISH=1) brings the
  # caller's tree again, which must not change the code the run's remaining mutants import
  tar -cf - --exclude=./.git . | tar -C "$work/src" -xf - || exit 1
  # the cache 'manifest new' reads each mutant's pinned tree from: the exported tree of the
  # matrix's pin (SOURCES_TAR; default vLLM 0.33.0's Triton kernel tree)
  [ -e "$work/cache/trees/.extracted" ] || { tar -C "$work/cache/trees" -xJf \
    "${SOURCES_TAR:-.carry/pr-sources.tar.xz}" && touch "$work/cache/trees/.extracted"; } || exit 1
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
    echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
    echo "catalogue $CATALOGUE, $JOBS runs at once"
  } > "$work/mutate.log" 2>&1
  # its own process session (setsid): with DETACH=1 it goes on after this call returns
  (cd "$work/src" && PYTHONPATH=/tmp/site:$work/src TOPP_GATE_CACHE=$work/cache setsid sh -c '
    started=$(date +%s)
    python3 -m harness mutate --manifest "evidence/manifests/pr/$0.json" --backend cuda \
      --catalogue "$1" --out "$2/$0-mutation" --key "$3" --sources "$2/cache/trees" \
      --jobs "$4" --run-timeout "$5" $7 ${6:+--only "$6"}
    echo "mutate rc=$?"
    echo "== mutation took $(( $(date +%s) - started )) s"
    touch "$2/done"' "$MATRIX" "$CATALOGUE" "$work" "$KEY" "$JOBS" "${RUN_TIMEOUT:-480}" "$ONLY" "$CRITERION" \
    >> "$work/mutate.log" 2>&1 < /dev/null &)
fi
while [ ! -e "$work/done" ] && [ "$(date +%s)" -lt "$DEADLINE" ]; do sleep 5; done
cp "$work/mutate.log" "$log"
if [ ! -e "$work/done" ]; then
  echo "still running at the deadline: call again with FINISH=1" >> "$log"
  [ -n "${DETACH:-}" ] || pkill -f "harness mutate" 
  exit 0
fi
{
  for f in "$work/$MATRIX-mutation"/logs/*.log; do echo "== $(basename "$f")"; grep -v '━' "$f" | tail -3; done
  du -sb "$work/$MATRIX-mutation"
} >> "$log" 2>&1
[ -d "$work/$MATRIX-mutation" ] && device_tar "$RUN-mutation" "$work/$MATRIX-mutation" >> "$log"
date -u >> "$log"
