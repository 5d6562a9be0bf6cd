#!/usr/bin/env bash
# One call on the lent GPU machine (no network): 'topp-gate pr' for FlashInfer (issue 39), as
# a contributor runs it. Base FlashInfer 0.7.2.post1 (its pin), the newest FlashInfer
# PR matrix pr picks (pr-flashinfer-v3, rule set regression-support/v2, its draws declared
# and checked; the first run, on an H100 on 2026-12-05, had pr-flashinfer-v1 and
# regression-support/v1), three runs:
#   harmless      a comment added to flashinfer/sampling.py, both sides run (PASS expected);
#   harmful-both  a harmful one-line change, both sides run (--no-reuse), at the same time as
#                 harmless: it builds the harmful copy's JIT module while the others build
#                 theirs (each side JIT-builds FlashInfer's sampling module from its own pinned
#                 copy, about 156 s on an H200 (2026-12-03); copies differ by sampling.py);
#   harmful       the same harmful change again, reusing the base side 'harmless' verified
#                 (STOP expected, the same rows as harmful-both).
# The harmful change: top_k_top_p_sampling_from_logits takes the softmax of the logits instead
# of the top-k-masked logits, so top-k is lost before top-p sampling and rows whose nucleus
# holds tokens beyond their k draw outside them (docs/mutation.md, "FlashInfer").
#
# Carry (.whl .carry; .carry is git-ignored), made on the machine that calls:
#   .carry/fi072-sources.tar.xz  topp-gate sources export DIR --pin evidence/pins/flashinfer-0.7.2.post1.json
#                                tar -C DIR -cJf .carry/fi072-sources.tar.xz .
#   .carry/bubblewrap.deb        apt-get download bubblewrap (the sandbox; the image has none)
#   .carry/<key>                 the signing key, named by KEY (scripts/device_common.sh)
#   .whl/                        the wheels device_common.sh installs, apache-tvm-ffi among them
# Each change's code runs in bubblewrap's sandbox when one can be made here; when none can,
# or the sandboxed harmless run is refused or its base cannot run (exit 2), --unsandboxed
# (both diffs are this script's own). Results in $OUT: pr-flashinfer.log (preflight, each
# run's exit and wall time), pr-NAME.log per run, and the results folder as
# pr-flashinfer.tar.xz parts. No run goes past DEADLINE (default: 560 s after the start).
#
#   device run: KEY=.carry/topp-gate-evidence-6.key bash scripts/device_pr_flashinfer.sh
#               (carry: .whl .carry)
set -uo pipefail
DEADLINE=${DEADLINE:-$(( $(date +%s) + 560 ))}
pin=evidence/pins/flashinfer-0.7.2.post1.json
file=flashinfer/sampling.py
old='        probs = torch.softmax(masked_logits, dim=-1)'
new='        probs = torch.softmax(logits, dim=-1)'
. scripts/device_common.sh
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-workspace MAX_JOBS=${MAX_JOBS:-16}
work=/tmp/pr-flashinfer
log=$OUT/pr-flashinfer.log
mkdir -p "$work/trees" "$work/results" "$FLASHINFER_WORKSPACE_BASE"
tar -C "$work/trees" -xJf .carry/fi072-sources.tar.xz || exit 1
pinned=$(find "$work/trees" -path "*/$file" | head -1)
python3 scripts/make_pr_diffs.py "$pinned" "$work" "$file" "$old" "$new" || exit 1
# pr CHANGE NAME CACHE [FLAGS]: one 'topp-gate pr' into results/NAME (its output in
# $OUT/pr-NAME.log), cut 45 s before the deadline (kept for packing the results)
pr() {
  local left started rc
  left=$(( DEADLINE - $(date +%s) - 45 ))
  if [ "$left" -lt 60 ]; then echo "== $2: not started, ${left} s left"; return 124; fi
  echo "== $2 ($(date -u +%T), at most $left s): topp-gate pr $pin --patch $1.diff --backend cuda ${*:4}"
  started=$(date +%s)
  timeout "$left" python3 -m harness pr "$pin" --patch "$work/$1.diff" --backend cuda \
    --key "$KEY" --out "$work/results/$2" --sources "$work/trees" --cache "$3" \
    --workers 8 "${@:4}" > "$OUT/pr-$2.log" 2>&1
  rc=$?
  echo "== $2: exit $rc after $(( $(date +%s) - started )) s (0 PASS, 1 STOP, 2 refused or base failed, 124 timeout)"
  return "$rc"
}
# both: the harmless run and the harmful one with both sides run, at once (SUFFIX, FLAGS)
both() {
  pr harmless "harmless$1" "$work/cache$1" "${@:2}" &
  local first=$!
  pr harmful "harmful-both$1" "$work/cache-both$1" --no-reuse "${@:2}"
  wait "$first"
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "sm", torch.cuda.get_device_properties(0).multi_processor_count)'
  python3 -c 'import tvm_ffi; print("tvm_ffi", tvm_ffi.__version__)'
  command -v nvcc && nvcc --version | tail -2
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  flags=()
  if python3 -c 'from harness.kernels import sandbox; print(sandbox.probe().record())'; then
    echo "sandbox: bubblewrap works here"
    both ""
    rc=$?
    if [ "$rc" -eq 2 ]; then
      echo "the sandboxed harmless run ended with exit 2 ($(tail -n 1 "$OUT/pr-harmless.log")); again --unsandboxed"
      flags=(--unsandboxed)
      both -unsandboxed "${flags[@]}"
    fi
  else
    echo "sandbox: bubblewrap does not work here; running --unsandboxed (this script's own diffs)"
    flags=(--unsandboxed)
    both "" "${flags[@]}"
  fi
  suffix=${flags[0]:+-unsandboxed}
  pr harmful "harmful$suffix" "$work/cache$suffix" "${flags[@]}"
  date -u
} > "$log" 2>&1
# the JIT's build logs, when a build failed (the reason, for the report)
find "${HOME:-/root}/.cache/topp-gate/stable-trees" -name '*.log' -size -2M \
  -exec tail -n 30 {} + >> "$log" 2>/dev/null
[ -n "$(ls -A "$work/results")" ] && device_tar pr-flashinfer "$work/results" >> "$log"
ls -la "$OUT"
