#!/usr/bin/env bash
# One call on the lent GPU machine (no network): 'topp-gate pr' for FlashInfer (issue 39), as
# a contributor runs it. Base FlashInfer 0.7.2.post1 (its pin), matrix pr-flashinfer-v1 (rule
# set regression-support/v1). First a harmless change (a comment added to
# flashinfer/sampling.py: PASS expected) with no verified base side kept, so both kernel
# children run (each JIT-builds FlashInfer's sampling module from its own pinned copy: the
# copies differ by that file); then a harmful one-line change that reuses the base side the
# first run verified (STOP expected): top_k_top_p_sampling_from_logits takes the softmax of
# the logits instead of the top-k-masked logits, so top-k is lost before top-p sampling and
# rows with top-k below the nucleus draw outside their k tokens.
#
# Carry (.whl .carry; .carry is git-ignored), made on the machine that calls:
#   .carry/fi072-sources.tar.xz  topp-gate sources export DIR --pin evidence/pins/flashinfer-0.7.2.post1.json
#                                tar -C DIR -cJf .carry/fi072-sources.tar.xz .
#   .carry/bubblewrap.deb        apt-get download bubblewrap (the sandbox; the image has none)
#   .carry/<key>                 the signing key, named by KEY (scripts/device_common.sh)
#   .whl/                        the wheels device_common.sh installs, apache-tvm-ffi among them
# Each change's code runs in bubblewrap's sandbox when one can be made here, else (and when
# the sandboxed base could not run) --unsandboxed: both diffs are this script's own.
# Results in $OUT: pr-flashinfer.log (preflight, each answer and its wall time) and both
# folders as pr-flashinfer.tar.xz parts. Everything ends before DEADLINE (default: 560 s
# after the start).
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
mkdir -p "$work/trees" "$work/results" "$FLASHINFER_WORKSPACE_BASE" /tmp/bw
tar -C "$work/trees" -xJf .carry/fi072-sources.tar.xz || exit 1
pinned=$(find "$work/trees" -path "*/$file" | head -1)
python3 - "$pinned" "$work" "$file" "$old" "$new" <<'PY' || exit 1
import sys
from pathlib import Path
from harness.pins.sources import kernel_diff
pinned, work, path = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
old, new = sys.argv[4].encode(), sys.argv[5].encode()
src = pinned.read_bytes()
assert src.count(old) == 1, "the harmful line is not in the pinned file exactly once"
harmless = src.replace(b"\n", b"\n# reviewed: no functional change\n", 1)
(work / "harmless.diff").write_bytes(kernel_diff(src, harmless, path))
(work / "harmful.diff").write_bytes(kernel_diff(src, src.replace(old, new), path))
PY
sandbox=
if [ -f .carry/bubblewrap.deb ] && dpkg -x .carry/bubblewrap.deb /tmp/bw; then
  export PATH=/tmp/bw/usr/bin:$PATH
fi
# pr CHANGE NAME [FLAGS]: one 'topp-gate pr' into results/NAME, cut at the deadline
pr() {
  local left started rc
  left=$(( DEADLINE - $(date +%s) - 45 ))  # 45 s kept for packing the results
  if [ "$left" -lt 60 ]; then echo "== $2: not started, ${left} s left"; return 124; fi
  echo "== topp-gate pr $pin --patch $1.diff --backend cuda ${*:3} (at most $left s)"
  started=$(date +%s)
  timeout "$left" python3 -m harness pr "$pin" --patch "$work/$1.diff" --backend cuda \
    --key "$KEY" --out "$work/results/$2" --sources "$work/trees" --cache "$work/cache" \
    --workers 12 "${@:3}"
  rc=$?
  echo "exit $rc after $(( $(date +%s) - started )) s"
  return "$rc"
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "sm", torch.cuda.get_device_properties(0).multi_processor_count)'
  python3 -c 'import tvm_ffi; print("tvm_ffi", tvm_ffi.__version__)'
  command -v nvcc && nvcc --version | tail -2
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  if python3 -c 'from harness.kernels import sandbox; print(sandbox.probe().record())'; then
    echo "sandbox: bubblewrap works here"
  else
    sandbox=--unsandboxed
    echo "sandbox: bubblewrap does not work here; running --unsandboxed (this script's own diffs)"
  fi
  pr harmless pr-harmless ${sandbox:+"$sandbox"}
  rc=$?
  if [ "$rc" -eq 2 ] && [ -z "$sandbox" ]; then
    # refused, or the base could not run in the sandbox: once more without it
    sandbox=--unsandboxed
    echo "the sandboxed run ended with exit 2; again --unsandboxed"
    pr harmless pr-harmless-unsandboxed "$sandbox"
  fi
  pr harmful pr-harmful ${sandbox:+"$sandbox"}
  date -u
} > "$log" 2>&1
# the JIT's build logs, when a build failed (the reason, for the report)
find "${HOME:-/root}/.cache/topp-gate/stable-trees" -name '*.log' -size -2M -exec tail -n 30 {} + \
  >> "$log" 2>/dev/null
[ -n "$(ls -A "$work/results")" ] && device_tar pr-flashinfer "$work/results" >> "$log"
ls -la "$OUT"
