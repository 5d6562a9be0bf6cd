#!/usr/bin/env bash
# One call on the lent GPU machine (no network): 'topp-gate pr' as a contributor runs it, for
# one family (FAMILY, default vllm-triton). First a harmless change (a comment added to the
# pinned file: PASS expected), with no verified base side kept, so both kernel children run;
# then a harmful one-line change that reuses the base side the first run verified (STOP
# expected). Both signed with $KEY (scripts/device_common.sh); one run at a time.
#   FAMILY=vllm-triton   base vLLM 0.33.0's Triton kernel, pr-cuda-v4 (issue 26): the split
#                        mask kernel keeps prob >= pivot (catalogue v1's cmp-keep-ge);
#                        carry .carry/pr-sources.tar.xz
#   FAMILY=vllm-pytorch  base vLLM 0.33.0's PyTorch path, pr-pytorch-cuda-v1 (issue 39): the
#                        top-p mask keeps cumulative sums < 1 - p instead of <= (catalogue
#                        pytorch-v1's pt-topp-mask-lt); carry .carry/pt-sources.tar.xz
# Each tar.xz is 'topp-gate sources export DIR --pin PIN' packed with tar -C DIR -cJf.
# Results in $OUT: pr-$FAMILY.log (each answer and its wall time) and both folders as
# pr-$FAMILY.tar.xz parts.
#
#   device run: FAMILY=... bash scripts/device_pr.sh   (carry: .whl .carry)
set -uo pipefail
FAMILY=${FAMILY:-vllm-triton}
case $FAMILY in
  vllm-triton)
    pin=evidence/pins/vllm-0.33.0.json sources=.carry/pr-sources.tar.xz
    file=vllm/v1/sample/ops/topk_topp_triton.py
    old='keep = (prob > pivot) | (x == M)' new='keep = (prob >= pivot) | (x == M)' ;;
  vllm-pytorch)
    pin=evidence/pins/vllm-pytorch-0.33.0.json sources=.carry/pt-sources.tar.xz
    file=vllm/v1/sample/ops/topk_topp_sampler.py
    old='top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)'
    new='top_p_mask = probs_sum < 1 - p.unsqueeze(dim=1)' ;;
  *) echo "FAMILY: vllm-triton or vllm-pytorch, not $FAMILY" >&2; exit 2 ;;
esac
. scripts/device_common.sh
work=/tmp/pr-$FAMILY
mkdir -p "$work/trees" "$work/results"
tar -C "$work/trees" -xJf "$sources" || exit 1
pinned=$(find "$work/trees" -path "*/$file" | head -1)
python3 scripts/make_pr_diffs.py "$pinned" "$work" "$file" "$old" "$new" || exit 1
log=$OUT/pr-$FAMILY.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "source commit (claimed by the caller): ${TOPP_GATE_SOURCE_COMMIT:-none} clean=${TOPP_GATE_SOURCE_CLEAN:-?}"
  for change in harmless harmful; do
    echo "== topp-gate pr $pin --patch $change.diff --backend cuda"
    started=$(date +%s)
    python3 -m harness pr "$pin" --patch "$work/$change.diff" \
      --backend cuda --key "$KEY" --out "$work/results/pr-$change" --sources "$work/trees" \
      --cache "$work/cache" --workers 12
    echo "exit $? after $(( $(date +%s) - started )) s"
  done
} > "$log" 2>&1
device_tar "pr-$FAMILY" "$work/results" >> "$log"
