#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): time 'topp-gate pr' as a contributor runs it
# (issue 26: one run at most 5 minutes on one H200). Base vLLM 0.33.0 (its pin); first a
# harmless change (a comment added to the kernel: PASS expected), with no verified base side
# kept, so both kernel children run; then a harmful one-line change (the final mask pass keeps
# prob >= pivot in the split mask kernel: catalogue v1's cmp-keep-ge) that reuses the base side the
# first run verified. Both signed with $KEY. Carry as scripts/device_mutate.sh (.whl, .carry).
# Results in $OUT: pr.log (each answer and its wall time) and both folders as pr.tar.xz parts.
#
#   device run: bash scripts/device_pr.sh   (carry: .whl .carry)
set -uo pipefail
. scripts/device_common.sh
work=/tmp/pr-timing
mkdir -p "$work/trees" "$work/results"
tar -C "$work/trees" -xJf .carry/pr-sources.tar.xz || exit 1
kernel=$(find "$work/trees" -path '*/vllm/v1/sample/ops/topk_topp_triton.py' | head -1)
python3 - "$kernel" "$work" <<'PY'
import sys
from pathlib import Path
from harness.pins.sources import kernel_diff
kernel, work = Path(sys.argv[1]), Path(sys.argv[2])
src = kernel.read_bytes()
path = "vllm/v1/sample/ops/topk_topp_triton.py"
harmless = src.replace(b"\n", b"\n# reviewed: no functional change\n", 1)
line = b"keep = (prob > pivot) | (x == M)"
assert src.count(line) == 1
(work / "harmless.diff").write_bytes(kernel_diff(src, harmless, path))
(work / "harmful.diff").write_bytes(kernel_diff(src, src.replace(line, b"keep = (prob >= pivot) | (x == M)"), path))
PY
log=$OUT/pr.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  for change in harmless harmful; do
    echo "== topp-gate pr evidence/pins/vllm-0.33.0.json --patch $change.diff --backend cuda"
    started=$(date +%s)
    python3 -m harness pr evidence/pins/vllm-0.33.0.json --patch "$work/$change.diff" \
      --backend cuda --key "$KEY" --out "$work/results/pr-$change" --sources "$work/trees" \
      --cache "$work/cache" --workers 12
    echo "exit $? after $(( $(date +%s) - started )) s"
  done
} > "$log" 2>&1
device_tar pr "$work/results" >> "$log"
