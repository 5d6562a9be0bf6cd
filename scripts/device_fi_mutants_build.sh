#!/usr/bin/env bash
# One or more calls on the lent GPU machine (no network): check that every mutant of
# topp-gate/mutants/flashinfer-v1 (issue 39; FlashInfer 0.7.2.post1's sampling.cuh and
# topk.cuh) compiles, running no case. For the base and each mutant (ONLY: a comma-separated
# subset), scripts/fi_mutant_build.py makes the mutant's diff as 'topp-gate mutate' makes it,
# builds and hashes its candidate tree, copies it into the stable private copy a kernel child
# would use and JIT-builds FlashInfer's sampling module there with nvcc (get_sampling_module);
# one line each: "ID ok N s ..." or "ID failed ..." with the build log's tail.
#
# PAR builds at once, each with MAX_JOBS nvcc processes (ninja -j; default 12 x 2 on 16
# cores: a module is three .cu files, and sampling.cu's template instantiations dominate, so
# more builds at once pay better than more jobs a build. Measured on an H100: 3 x 3 built
# each module in 99 to 102 s; 12 x 2 built 20 modules in 276 s, 106 to 166 s each; one build
# alone took 100 to 156 s on an H200 with 16 jobs). A call stops starting builds 200 s
# before DEADLINE (default 560 s after the start) and kills what is left at the deadline: a
# later call on the same warm machine skips the mutants already built (their .ok marks) and
# ninja resumes the others from the object files it kept. The builds live where
# scripts/device_mutate.sh's run of the same RUN looks for them (TOPP_GATE_CACHE=
# /tmp/mutate-$RUN/cache, its stable-trees/*.build folders), so a 'mutate' call after this one
# on the same warm machine finds every module up to date and runs only the cases.
#
# Carry (.whl .carry), made on the machine that calls:
#   .carry/fi072-sources.tar.xz  topp-gate sources export DIR --pin evidence/pins/flashinfer-0.7.2.post1.json
#                                tar -C DIR -cJf .carry/fi072-sources.tar.xz .
#   .whl/                        the wheels device_common.sh installs, apache-tvm-ffi among them
#   .carry/<key>                 any key (device_common.sh chmods $KEY; nothing is signed here)
# Results in $OUT: fi-mutants-build.log (preflight, one line per mutant, failures' logs).
#
#   device run: bash scripts/device_fi_mutants_build.sh   (carry: .whl .carry)
#               ONLY=fi-mask-keep-gt,fi-radix-k-plus-1 bash scripts/device_fi_mutants_build.sh
set -uo pipefail
DEADLINE=${DEADLINE:-$(( $(date +%s) + 560 ))}
PAR=${PAR:-12}
RUN=${RUN:-pr-flashinfer-v2}
CATALOGUE=${CATALOGUE:-topp-gate/mutants/flashinfer-v1}
. scripts/device_common.sh
export MAX_JOBS=${MAX_JOBS:-2}
work=/tmp/mutate-$RUN
export TOPP_GATE_CACHE=$work/cache
log=$OUT/fi-mutants-build.log
mkdir -p "$work/cache/trees" "$work/built"
[ -e "$work/cache/trees/.extracted" ] || { tar -C "$work/cache/trees" -xJf \
  .carry/fi072-sources.tar.xz && touch "$work/cache/trees/.extracted"; } || exit 1
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  command -v nvcc && nvcc --version | tail -2
  python3 -c 'import tvm_ffi; print("tvm_ffi", tvm_ffi.__version__)'
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none}"
  echo "$CATALOGUE: $PAR builds at once, MAX_JOBS=$MAX_JOBS"
} >> "$log" 2>&1
ids=$(python3 -c 'import sys
from harness.mutation.mutant_catalogue import CATALOGUES
print(" ".join(m.id for m in CATALOGUES[sys.argv[1]]))' "$CATALOGUE") || exit 1
[ -n "${ONLY:-}" ] && ids=${ONLY//,/ }
build() {  # build ID: one mutant, its log in $work/built/ID.log, an .ok mark when it built
  local left=$(( DEADLINE - $(date +%s) ))
  timeout "$left" python3 scripts/fi_mutant_build.py "$1" --catalogue "$CATALOGUE" \
    > "$work/built/$1.log" 2>&1 && touch "$work/built/$1.ok"
}
for id in base $ids; do
  [ -e "$work/built/$id.ok" ] && { echo "$id: built in an earlier call" >> "$log"; continue; }
  [ $(( DEADLINE - $(date +%s) )) -ge 200 ] || { echo "$id: not started (deadline)" >> "$log"; continue; }
  while [ "$(jobs -rp | wc -l)" -ge "$PAR" ]; do sleep 2; done
  echo "$id: started $(date -u +%T)" >> "$log"
  build "$id" &
done
wait
for id in base $ids; do
  # the result line, not the log's first (FlashInfer's "Building JIT module" comes first)
  if [ -e "$work/built/$id.ok" ]; then grep -E "^$id ok " "$work/built/$id.log"
  elif [ -e "$work/built/$id.log" ]; then echo "== $id (not built):"; tail -60 "$work/built/$id.log"
  fi
done >> "$log" 2>&1
echo "built: $(ls "$work/built" | grep -c '\.ok$') of $(( $(echo $ids | wc -w) + 1 ))" >> "$log"
date -u >> "$log"
