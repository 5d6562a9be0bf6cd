"""The mutant catalogues of ``topp-gate mutate``, as data, one immutable tuple per id.

A catalogue id names a rule set for mutation testing, as a rule set id names the gate's
rules: once an id exists its entries never change (committed mutation summaries bind each
mutant's id, kind, description and diff to it); a change is a new id.

``topp-gate/mutants/v1``
    28 one-line mutations of vLLM 0.33.0's split top-p pipeline (the ``_topp_sb_*``
    kernels and the split count). Its entries carry no ``target`` or ``principle``; their
    six original fields are pinned by sha256 in ``tests/unit/mutation/test_mutant_catalogue.py``.
``topp-gate/mutants/v2``
    v1's 28 entries unchanged and in order, then 28 of the same kinds in the monolithic
    kernel ``_topk_topp_kernel`` (top-k search, its fallback and shortcuts, duplicate
    budgets and tie tolerances, top-k then top-p, standalone top-p, the final mask pass, the
    mixed batch's standalone skip) and in the dispatch ``apply_top_k_top_p_triton`` (batch
    threshold, ``has_topp_only_rows``, ``SPLIT_COVERS_PONLY``, split count, slice length).
    Each new entry names the function and branch it targets and the principle it tests.
    Entries that cannot change any output are argued so in their principle, never dropped.

``topp-gate/mutants/pytorch-v1``
    20 one-line mutations of vLLM 0.33.0's PyTorch path (family ``vllm-pytorch``, the file
    ``vllm/v1/sample/ops/topk_topp_sampler.py``): ``apply_top_k_top_p_pytorch``'s sort, top-k
    gather, top-p mask, keep-at-least-one line and scatter, and ``apply_top_k_only``. Each
    entry names target and principle; the two ``apply_top_k_only`` entries and the entries
    argued likely equivalent say so in their principle, never dropped.

``topp-gate/mutants/flashinfer-v1``
    21 one-line mutations of FlashInfer 0.7.2.post1's CUDA headers (family ``flashinfer``,
    issue 39): ``include/flashinfer/sampling.cuh`` (top-k and top-p sampling's pivot
    acceptance, top-p renorm's ternary search, keep predicate, fast path and normalizer) and
    ``include/flashinfer/topk.cuh`` (the radix select behind top-k renorm, top-k mask and so
    top-k-top-p sampling: k counts, the suffix sum, keep predicates, the multi-CTA histogram
    reset, the single- or multi-CTA choice, precision). Each entry names its file
    (``path``), target and principle; entries argued equivalent say so. Not yet run on a GPU:
    compiled by ``scripts/device_fi_mutants_build.sh`` on the device machine.

:data:`KERNEL_PATHS` names each catalogue's kernel file: the patched side must pin it
(``topp-gate mutate`` refuses a manifest whose patched side pins another, naming the
catalogue that fits). An entry mutates that file, or the pinned file its ``path`` names
(:func:`mutation_path`). Every entry names one line by its exact text (and which of several
equal lines), so a mutant either applies exactly or is refused
(:func:`harness.mutation.mutate.mutate`); every entry of flashinfer-v1 names a line that
occurs exactly once in its file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

KINDS = ("comparison", "off-by-one", "dropped-clause", "constant", "precision")


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` by ``new`` on the line(s) holding ``old``: the ``occurrence``-th such
    line (1-based), or every one (``occurrence=0``). ``target``: the kernel function and
    branch the line belongs to; ``principle``: what a gate that kills it has shown it
    checks (empty for v1's entries, which predate both fields); ``path``: the file of the
    side's pinned set it mutates (issue 39; empty: the catalogue's kernel file,
    :data:`KERNEL_PATHS`)."""

    id: str
    kind: str
    what: str
    old: str
    new: str
    occurrence: int = 1
    target: str = ""
    principle: str = ""
    path: str = ""  # the pinned file it mutates; empty: the catalogue's (KERNEL_PATHS)


V1_ID = "topp-gate/mutants/v1"
V2_ID = "topp-gate/mutants/v2"
PYTORCH_V1_ID = "topp-gate/mutants/pytorch-v1"
FLASHINFER_V1_ID = "topp-gate/mutants/flashinfer-v1"
DEFAULT_ID = V2_ID
TRITON_PATH = "vllm/v1/sample/ops/topk_topp_triton.py"
SAMPLER_PATH = "vllm/v1/sample/ops/topk_topp_sampler.py"
FLASHINFER_PATH = "flashinfer/sampling.py"  # the family's kernel file (what the side pins)
FI_SAMPLING_CUH = "flashinfer/data/include/flashinfer/sampling.cuh"
FI_TOPK_CUH = "flashinfer/data/include/flashinfer/topk.cuh"

_F16 = ".to(tl.float16).to(tl.float32)"

# --- topp-gate/mutants/v1: frozen (committed summaries bind these entries) -------------------

V1: tuple[Mutation, ...] = (
    # comparison flips in keep predicates and search tests
    Mutation("cmp-keep-ge", "comparison", "mask kernel keeps prob >= pivot",
             "keep = (prob > pivot) | (x == M)", "keep = (prob >= pivot) | (x == M)"),
    Mutation("cmp-above-ge", "comparison", "step kernel counts mass at prob >= pivot",
             "above = pr2 > pivs[:, None]", "above = pr2 >= pivs[:, None]"),
    Mutation("cmp-ok-gt", "comparison", "a pivot qualifies only with mass > p",
             "ok = (mass >= p) & (mass - gmin * nmin < p)",
             "ok = (mass > p) & (mass - gmin * nmin < p)"),
    Mutation("cmp-ok-dup-le", "comparison", "minimality test mass - dup mass <= p",
             "ok = (mass >= p) & (mass - gmin * nmin < p)",
             "ok = (mass >= p) & (mass - gmin * nmin <= p)"),
    Mutation("cmp-nomask-gt", "comparison", "whole-row guard pivot * Z > 1",
             "nomask = tl.where(pivot * Z >= 1.0, 1.0, 0.0)",
             "nomask = tl.where(pivot * Z > 1.0, 1.0, 0.0)"),
    Mutation("cmp-best-lt", "comparison", "fallback tracks the smallest qualifying pivot",
             "if bp > best:", "if bp < best:"),
    Mutation("cmp-ties-le", "comparison", "duplicate handling runs when numkeep <= numdup",
             "ties = numkeep < numdup", "ties = numkeep <= numdup"),
    # off-by-one in budgets and bounds
    Mutation("obo-dup-budget-lt", "off-by-one", "one boundary duplicate fewer kept",
             "keep_dup = dmask & (cum <= numkeep)", "keep_dup = dmask & (cum < numkeep)"),
    Mutation("obo-dup-budget-plus1", "off-by-one", "one boundary duplicate more kept",
             "keep_dup = dmask & (cum <= numkeep)",
             "keep_dup = dmask & (cum <= numkeep + 1.0)"),
    Mutation("obo-numkeep-floor0", "off-by-one", "duplicate budget may reach 0",
             "numkeep = tl.minimum(tl.maximum(numkeep, 1.0), numdup)",
             "numkeep = tl.minimum(tl.maximum(numkeep, 0.0), numdup)"),
    Mutation("obo-preceding-le", "off-by-one", "a slice counts its own duplicates as preceding",
             "num_preceding = tl.sum(tl.where(sidx < slice_id, dupc_s, 0.0))",
             "num_preceding = tl.sum(tl.where(sidx <= slice_id, dupc_s, 0.0))"),
    Mutation("obo-slice-len-mask", "off-by-one", "mask kernel slices of floor(V / S)",
             "slice_len = (VOCAB_SIZE + S - 1) // S", "slice_len = VOCAB_SIZE // S", 3),
    Mutation("obo-slice-len-step", "off-by-one", "step kernel slices of floor(V / S)",
             "slice_len = (VOCAB_SIZE + S - 1) // S", "slice_len = VOCAB_SIZE // S", 2),
    Mutation("obo-split-count", "off-by-one", "split count doubles only while 2 S B < SMs",
             "splits * 2 * batch_size <= num_sm or", "splits * 2 * batch_size < num_sm or"),
    # dropped clauses
    Mutation("drop-keep-max", "dropped-clause", "mask kernel no longer keeps the row maximum",
             "keep = (prob > pivot) | (x == M)", "keep = prob > pivot"),
    Mutation("drop-ok-minimal", "dropped-clause", "a pivot qualifies on mass >= p alone",
             "ok = (mass >= p) & (mass - gmin * nmin < p)", "ok = mass >= p"),
    Mutation("drop-dup-mask", "dropped-clause", "boundary duplicates all kept",
             "keep = keep & (~dmask | keep_dup)", "keep = keep"),
    # changed constants of the search
    Mutation("const-rounds-3", "constant", "3 search rounds instead of 5",
             "_SPLIT_ROUNDS = 5", "_SPLIT_ROUNDS = 3"),
    Mutation("const-fanout-4", "constant", "4 ladder pivots per round instead of 8",
             "_SPLIT_FANOUT = 8", "_SPLIT_FANOUT = 4"),
    Mutation("const-collapse-1e-3", "constant", "range collapse at 1e-3 instead of 1e-7",
             "(new_hi > new_lo * (1.0 + 1e-7))", "(new_hi > new_lo * (1.0 + 1e-3))"),
    Mutation("const-tie-tol-1e-6", "constant", "step kernel tie tolerance 1e-6",
             "is_same = tl.abs(tmin - minl) < 1e-9", "is_same = tl.abs(tmin - minl) < 1e-6"),
    Mutation("const-uniform-1e-3", "constant", "mask kernel calls rows within 1e-3 uniform",
             "if max_prob <= min_prob * (1.0 + 1e-6):",
             "if max_prob <= min_prob * (1.0 + 1e-3):", 2),
    Mutation("const-min-prob-1e-12", "constant", "ladder floor 1e-12 instead of 1e-30",
             "min_prob = tl.maximum(tl.exp(mn - M) / Z, 1e-30)",
             "min_prob = tl.maximum(tl.exp(mn - M) / Z, 1e-12)", 0),
    Mutation("const-ladder-top", "constant", "ladder's last pivot is hi itself",
             "(fidx + 1.0) / (F + 1.0))", "(fidx + 1.0) / F)"),
    # precision changes
    Mutation("prec-mask-recip", "precision", "mask kernel prob = exp(x - M) * (1 / Z)",
             "prob = tl.exp(x - M) / Z", "prob = tl.exp(x - M) * (1.0 / Z)"),
    Mutation("prec-step-fp16", "precision", "step kernel probabilities in float16",
             "pr = tl.exp(x - M) / Z", f"pr = (tl.exp(x - M) / Z){_F16}"),
    Mutation("prec-stats-fp16", "precision", "stats kernel exponent in float16",
             "e = tl.where(finite, tl.exp(x - nm), 0.0)",
             f"e = tl.where(finite, tl.exp((x - nm){_F16}), 0.0)"),
    Mutation("prec-rowsum-fp16", "precision", "row normalizer summed in float16",
             "Z = tl.sum(exp_s * w)", f"Z = tl.sum((exp_s * w){_F16})"),
)

# --- topp-gate/mutants/v2: the monolithic kernel and the dispatch ----------------------------

_MONO = "_topk_topp_kernel"
_TOPK = f"{_MONO}: top-k"
_KP = f"{_MONO}: top-k then top-p"
_PONLY = f"{_MONO}: standalone top-p"
_FINAL = f"{_MONO}: final mask pass"
_DISPATCH = "apply_top_k_top_p_triton"
_STOP_K = "if num_iters >= 18 or tl.abs(min_range - max_range) < 1e-9:"
_STOP_P = "if (max_range - min_range) < 1e-9 or num_iters >= 18:"
_BUDGET_P = "(p_pivots_sum - p) / min_larger_prob, tl.uint32"
_PROBS = "probs_blk = probs_blk / sum_exp_logits"

MONOLITHIC_AND_DISPATCH: tuple[Mutation, ...] = (
    # top-k: outlier gathering, search bounds and termination, shortcuts, budget
    Mutation(
        "mk-topk-percentile-100", "constant", "top-k percentile index k / V * 100",
        "percentile = tl.cast(k / VOCAB_SIZE * 200, tl.uint32)",
        "percentile = tl.cast(k / VOCAB_SIZE * 100, tl.uint32)",
        target=f"{_TOPK}, zeroth pass (sigma pivot from the percentile table)",
        principle="gathering outliers above a sigma pivot is a speed heuristic: the kept set "
        "must not depend on whether the buffer search or the whole-vocabulary fallback "
        "answers. Likely equivalent: the halved index sends most rows to the fallback, "
        "whose ternary search narrows its bracket threefold per iteration and is exact "
        "wherever it meets its termination test within 18 iterations (all but boundaries "
        "closer than range / 3^18)"),
    Mutation(
        "mk-topk-finite-ge", "comparison", "top-k counts -inf logits as finite",
        'finite_blk_mask = logits_blk > -float("inf")',
        'finite_blk_mask = logits_blk >= -float("inf")',
        target=f"{_TOPK}, first pass (finite count and minimum)",
        principle="masked (-inf) tokens are not candidates: a row with at most k finite "
        "logits keeps them all, and -inf never becomes a search bound (rows without -inf "
        "are unaffected)"),
    Mutation(
        "mk-topk-unmasked-lt", "off-by-one", "no-search shortcut only below k finite logits",
        "if num_finite_total <= k:", "if num_finite_total < k:",
        target=f"{_TOPK}, shortcut when the row has at most k finite logits",
        principle="likely equivalent: with exactly k finite logits the search that now runs "
        "cannot reach its termination test, ends after 18 iterations, and its pivot is "
        "discarded by 'final_pivot = k_pivot if num_finite_total > k' (and top-p after "
        "top-k is skipped by the same test), so standalone top-p runs as before"),
    Mutation(
        "mk-topk-k-lt-v-le", "comparison", "top-k runs also when k == V",
        "if k < VOCAB_SIZE:", "if k <= VOCAB_SIZE:",
        target=f"{_TOPK}, the k >= V shortcut",
        principle="likely equivalent: with k == V the percentile is clamped to 199 and the "
        "row has at most V = k finite logits, so the unmasked-count shortcut sets the pivot "
        "to -inf and standalone top-p runs as before (only time is spent)"),
    Mutation(
        "mk-topk-iters-6", "constant", "top-k buffer search stops after 6 iterations",
        _STOP_K, _STOP_K.replace(">= 18", ">= 6"), 1,
        target=f"{_TOPK}, ternary search over the gathered outliers (termination)",
        principle="a search that stops before it brackets the k-th logit returns a midpoint "
        "pivot with an unset count: top-k must keep exactly min(k, V) tokens (observable "
        "only where the gap at the k-th logit is below about range / 3^6: large vocab, "
        "large k)"),
    Mutation(
        "mk-topk-fallback-floor", "off-by-one",
        "whole-vocabulary fallback searches from the sigma pivot, not the row minimum",
        "min_range = min_logit", "min_range = outlier_pivot",
        target=f"{_TOPK}, whole-vocabulary fallback (fewer than k outliers gathered)",
        principle="the fallback's bracket must contain the k-th logit: when fewer than k "
        "logits lie above the sigma pivot, a search bounded by it keeps fewer than k"),
    Mutation(
        "mk-topk-fallback-stop-1e-3", "constant", "fallback search range stop 1e-3",
        _STOP_K, _STOP_K.replace("< 1e-9", "< 1e-3"), 2,
        target=f"{_TOPK}, whole-vocabulary fallback (termination)",
        principle="the range stop must be below any gap between distinct logits at the "
        "boundary: stopping at 1e-3 returns a midpoint pivot inside a dense region "
        "(observable only on rows that reach the fallback)"),
    Mutation(
        "mk-topk-keep-minus1", "off-by-one", "one boundary duplicate fewer kept by top-k",
        "num_keep = num_duplicate_logit - (k_pivots_num - k)",
        "num_keep = num_duplicate_logit - (k_pivots_num - k) - 1",
        target=f"{_TOPK}, duplicate budget at the k-th logit",
        principle="top-k keeps exactly k tokens: the budget of tokens tied at the k-th "
        "logit is what tops the count up to k"),
    Mutation(
        "mk-tie-tol-1e-6", "constant", "min-larger tie tolerance 1e-6",
        "tile_eq = above_mask & (tl.abs(data - tile_min) < 1e-9)",
        "tile_eq = above_mask & (tl.abs(data - tile_min) < 1e-6)",
        target="_update_min_larger_stats (every search of the monolithic kernel)",
        principle="ties are counted by a tolerance far below the values compared: at 1e-6, "
        "distinct probabilities (about 1e-4 to 1e-6) and near-equal logits count as one "
        "duplicate group, so termination tests and budgets count wrong"),
    # top-k then top-p
    Mutation(
        "mk-kp-pivot-no-sum", "dropped-clause", "top-k+top-p pivot log(p_pivot) + max",
        "final_pivot = tl.log(p_pivot * sum_exp_logits) + max_logit",
        "final_pivot = tl.log(p_pivot) + max_logit",
        target=f"{_KP}, probability pivot back to logit space",
        principle="a probability pivot maps back to logits as log(p_pivot * sum) + "
        "max_logit; without the normalizer the threshold is low and top-p keeps too many"),
    Mutation(
        "mk-kp-iters-8", "constant", "top-k+top-p pivot search stops after 8 iterations",
        _STOP_P, _STOP_P.replace(">= 18", ">= 8"), 1,
        target=f"{_KP}, probability pivot search over the kept outliers (termination)",
        principle="an early stop leaves a midpoint pivot that neither reaches p nor is "
        "minimal: the nucleus must reach p with the fewest tokens"),
    Mutation(
        "mk-kp-budget-plus1", "off-by-one", "top-k+top-p drops one boundary duplicate more",
        _BUDGET_P, _BUDGET_P.replace("min_larger_prob,", "min_larger_prob + 1.0,"), 1,
        target=f"{_KP}, duplicate budget at the probability pivot",
        principle="the duplicate budget drops only tokens whose removal keeps the mass >= "
        "p: one more dropped leaves the nucleus short of p"),
    # standalone top-p
    Mutation(
        "mk-p-max-sample-100", "constant", "standalone top-p shift mean + 100 std",
        "max_sample = avg_logit + std_logit * 10.0",
        "max_sample = avg_logit + std_logit * 100.0",
        target=f"{_PONLY}, statistics of the first tile (mean + 10 std)",
        principle="the exponent shift must keep exp(x - shift) in float32 range: shifted "
        "100 std up, the weights underflow to subnormals or zero and the normalizer loses "
        "its precision (or is 0, making every probability NaN)"),
    Mutation(
        "mk-p-iters-8", "constant", "standalone top-p outlier search stops after 8 iterations",
        _STOP_P, _STOP_P.replace(">= 18", ">= 8"), 2,
        target=f"{_PONLY}, pivot search over the gathered outliers (termination)",
        principle="an early stop leaves a midpoint pivot: the nucleus must reach p with "
        "the fewest tokens"),
    Mutation(
        "mk-p-full-stop-1e-6", "constant", "standalone top-p full-row search stops at 1e-6",
        _STOP_P, _STOP_P.replace("< 1e-9", "< 1e-6"), 3,
        target=f"{_PONLY}, full-vocabulary search (outliers held less than p)",
        principle="the range stop must be below the gaps between boundary probabilities "
        "(about 1e-5 at vocab 128k): at 1e-6 the search stops inside them"),
    Mutation(
        "mk-p-probs-fp16", "precision", "standalone top-p outlier probabilities in float16",
        _PROBS, f"probs_blk = (probs_blk / sum_exp_logits){_F16}", 3,
        target=f"{_PONLY}, second pass (softmax and outlier gathering)",
        principle="probabilities keep float32 precision: rounded to float16 (11 bits) they "
        "tie tokens that differ and move the mass at the boundary"),
    Mutation(
        "mk-p-budget-round", "off-by-one", "standalone top-p duplicate budget rounded",
        _BUDGET_P, _BUDGET_P.replace("min_larger_prob,", "min_larger_prob + 0.5,"), 2,
        target=f"{_PONLY}, duplicate budget at the probability pivot",
        principle="the number of boundary duplicates that may go is floor(excess / "
        "probability): rounding it drops one too many when the fraction is >= 0.5, leaving "
        "the mass below p"),
    Mutation(
        "mk-p-guard-nan", "comparison", "whole-mask guard written pivot >= max (NaN passes)",
        "if not (final_pivot < max_logit):", "if final_pivot >= max_logit:",
        target=f"{_FINAL}, guard (mask dropped when the pivot is not below the row max)",
        principle="a NaN pivot (an overflowed normalizer, e.g. a forced logit far above the "
        "first tile) must leave the row unmasked, never mask every token: 'not <' catches "
        "NaN, '>=' does not"),
    # the final mask pass
    Mutation(
        "mk-final-keep-ge", "comparison", "final pass keeps x >= pivot",
        "keep_mask = (logits_blk > final_pivot) & mask_n",
        "keep_mask = (logits_blk >= final_pivot) & mask_n",
        target=f"{_FINAL}, keep predicate",
        principle="the keep predicate is strict: a logit equal to the pivot is outside "
        "(changes output only when a pivot lands exactly on a logit; may survive)"),
    Mutation(
        "mk-final-dup-lt", "off-by-one", "final pass keeps one boundary duplicate fewer",
        "duplicate_keep_mask = (duplicate_count <= num_keep) & duplicate_mask",
        "duplicate_keep_mask = (duplicate_count < num_keep) & duplicate_mask",
        target=f"{_FINAL}, duplicate budget",
        principle="exactly num_keep of the tokens tied at the boundary stay (lowest ids "
        "first): top-k counts are exact, top-p mass reaches p"),
    Mutation(
        "mk-final-dup-carry", "dropped-clause", "final pass budget restarts in every tile",
        "duplicate_count = tl.cumsum(duplicate_mask) + num_kept",
        "duplicate_count = tl.cumsum(duplicate_mask)", 2,
        target=f"{_FINAL}, duplicate budget carried across tiles",
        principle="a budget is per row, not per tile: ties spread over several tiles "
        "(BLOCK_SIZE 8192 on CUDA, 256 on CPU) are each granted the whole budget"),
    # the mixed batch's standalone skip
    Mutation(
        "mk-mixed-skip-le", "comparison", "mixed batch also runs standalone top-p at k == V",
        "run_standalone = tl.load(K + row_id) < VOCAB_SIZE",
        "run_standalone = tl.load(K + row_id) <= VOCAB_SIZE",
        target=f"{_PONLY}, mixed batch's skip of rows the split pipeline covers",
        principle="each row gets top-p once: a p-only row with k == V is masked here and "
        "again by the split pipeline (top-p of an already truncated row keeps fewer)"),
    Mutation(
        "mk-mixed-skip-drop", "dropped-clause", "standalone top-p skipped whenever top-k is on",
        "if SPLIT_COVERS_PONLY and TOPK_ENABLED:", "if TOPK_ENABLED:",
        target=f"{_PONLY}, mixed batch's skip (SPLIT_COVERS_PONLY)",
        principle="p-only rows of a batch with top-k get top-p from exactly one pipeline: "
        "without the split pipeline (batch > 64, not CUDA) the monolithic kernel must run it"),
    # the dispatch
    Mutation(
        "disp-use-split-lt", "off-by-one", "split pipeline only below batch 64",
        "topp_enabled and batch_size <= _SPLIT_MAX_BATCH and",
        "topp_enabled and batch_size < _SPLIT_MAX_BATCH and",
        target=f"{_DISPATCH}: batch threshold (use_split)",
        principle="the dispatch path is part of the claim: batch 64 takes the split path "
        "(a manifest proves the path per case); the two paths also keep different sets"),
    Mutation(
        "disp-topp-only-not", "comparison", "split pipeline runs only without p-only rows",
        "if use_split and has_topp_only_rows:", "if use_split and not has_topp_only_rows:",
        target=f"{_DISPATCH}: has_topp_only_rows (mixed batch)",
        principle="p-only rows beside top-k rows at batch <= 64 are covered by the split "
        "pipeline (SPLIT_COVERS_PONLY skips them in the monolithic kernel): skipping it "
        "leaves them without top-p"),
    Mutation(
        "disp-split-ignores-topk", "dropped-clause", "split pipeline alone even with top-k",
        "if use_split and not topk_enabled:", "if use_split:",
        target=f"{_DISPATCH}: split-only path (no top-k)",
        principle="a batch with top-k must run the monolithic kernel: the split pipeline, "
        "called without k, applies top-p alone and drops every row's top-k"),
    Mutation(
        "disp-split-cap-le", "off-by-one", "split count may reach 2 * _SPLIT_MAX_SPLITS",
        "while splits < _SPLIT_MAX_SPLITS and (", "while splits <= _SPLIT_MAX_SPLITS and (",
        target="_topp_split_count (dispatch: split count)",
        principle="the split count is bounded by the workspace laid out for "
        "_SPLIT_MAX_SPLITS slices. Likely equivalent where 64 slices are reached (batch * "
        "64 <= SMs: batch 1 or 2 on an H200; or vocab >= 458752) and still fit (batch <= "
        "32): slices change only the float summation order; out of bounds beyond that"),
    Mutation(
        "disp-slice-len-stats", "off-by-one", "stats kernel slices of floor(V / S)",
        "slice_len = (VOCAB_SIZE + S - 1) // S", "slice_len = VOCAB_SIZE // S", 1,
        target="_topp_sb_stats_kernel (dispatch: slice length)",
        principle="the slices cover the whole row: with V not a multiple of S the last "
        "V mod S tokens are left out of the row maximum, normalizer and minimum (v1 "
        "mutates the step and mask kernels' copies of this line)"),
)

V2: tuple[Mutation, ...] = V1 + MONOLITHIC_AND_DISPATCH

# --- topp-gate/mutants/pytorch-v1: vLLM's PyTorch path (issue 39) ----------------------------

_PT = "apply_top_k_top_p_pytorch"
_ONLY = "apply_top_k_only"
_SORT_LINE = "logits_sort, logits_idx = logits.sort(dim=-1, descending=False)"
_GATHER = "top_k_mask = logits_sort.size(1) - k.to(torch.long)  # shape: B"
_TOPP = "top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)"
_CUMSUM = "probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)"
_SOFTMAX = "probs_sort = logits_sort.softmax(dim=-1)"
_KEEP_ONE = "top_p_mask[:, -1] = False"
_UNREACHED = ("Not reached on the gated call pattern: vLLM calls the sort path with "
              "allow_cpu_sync False (a GPU server without Triton), so apply_top_k_only never "
              "runs, and the vllm-pytorch family's observer refuses a run where it does; "
              "survives by construction (outputs = base), kept to say so")

PYTORCH_V1: tuple[Mutation, ...] = (
    Mutation(
        "pt-sort-descending", "comparison", "the row sorted descending",
        _SORT_LINE, _SORT_LINE.replace("descending=False", "descending=True"),
        target=f"{_PT}: sort",
        principle="every index the function takes (V - k for top-k, the last position kept "
        "by top-p, the cumulative sum from the smallest) assumes an ascending sort"),
    Mutation(
        "pt-sort-stable", "comparison", "the sort made stable",
        _SORT_LINE, _SORT_LINE.replace("descending=False)", "descending=False, stable=True)"),
        target=f"{_PT}: sort (tie order)",
        principle="the order of tied logits decides which tied tokens top-p keeps: torch's "
        "default sort promises no order among ties, a stable one puts them in id order "
        "(argued likely equivalent on the CPU before it ran; measured not: on "
        "pr-pytorch-v1 the default CPU sort orders some ties otherwise)"),
    Mutation(
        "pt-topk-index-minus1", "off-by-one", "the k-th value read one place lower (V - k - 1)",
        _GATHER, _GATHER.replace("k.to(torch.long)", "k.to(torch.long) - 1"),
        target=f"{_PT}: top-k gather index",
        principle="the k-th largest value sits at ascending index V - k: one lower keeps one "
        "token more, and k = V reads index -1 (an error)"),
    Mutation(
        "pt-topk-index-plus1", "off-by-one", "the k-th value read one place higher (V - k + 1)",
        _GATHER, _GATHER.replace("k.to(torch.long)", "k.to(torch.long) + 1"),
        target=f"{_PT}: top-k gather index",
        principle="one higher keeps one token fewer, and k = 1 reads index V (an error)"),
    Mutation(
        "pt-topk-k-clamp-v-1", "constant", "k clamped to at most V - 1",
        _GATHER, _GATHER.replace("k.to(torch.long)",
                                 "k.to(torch.long).clamp(max=logits_sort.size(1) - 1)"),
        target=f"{_PT}: top-k for rows without top-k (k = V)",
        principle="a row without top-k carries k = V and must keep its whole row: a clamp "
        "below V masks its smallest logit (visible only where that row has no top-p that "
        "masks it anyway, and its smallest logit is finite)"),
    Mutation(
        "pt-topk-k-clamp-min2", "constant", "k clamped to at least 2",
        _GATHER, _GATHER.replace("k.to(torch.long)", "k.to(torch.long).clamp(min=2)"),
        target=f"{_PT}: top-k, k = 1",
        principle="k = 1 (greedy through top-k) keeps the maximum alone"),
    Mutation(
        "pt-topk-mask-le", "comparison", "top-k masks logits <= the k-th value",
        "top_k_mask = logits_sort < top_k_mask", "top_k_mask = logits_sort <= top_k_mask",
        target=f"{_PT}: top-k mask",
        principle="the k-th value itself is kept: masking it keeps k - 1 tokens (none for "
        "k = 1 but the top-p keep-at-least-one line)"),
    Mutation(
        "pt-topk-fill-finite", "constant", "top-k masks with -1e30 instead of -inf",
        'logits_sort.masked_fill_(top_k_mask, -float("inf"))',
        "logits_sort.masked_fill_(top_k_mask, -1e30)",
        target=f"{_PT}: top-k mask value",
        principle="a masked token is -inf in the output. Top-p re-masks these tokens (their "
        "probability is 0, at or below 1 - p) in a batch with any top-p row, so only a "
        "top-k-only batch shows it"),
    Mutation(
        "pt-topk-only-without-p", "dropped-clause", "top-k skipped when the batch has top-p",
        "    if k is not None:", "    if k is not None and p is None:", 2,
        target=f"{_PT}: top-k then top-p",
        principle="top-k applies before top-p on every row that has it, also in a batch "
        "with top-p rows"),
    Mutation(
        "pt-topp-mask-lt", "comparison", "top-p masks cumulative sums < 1 - p",
        _TOPP, _TOPP.replace("<=", "<"),
        target=f"{_PT}: top-p mask",
        principle="a token whose ascending cumulative sum equals 1 - p exactly lies outside "
        "the nucleus (the dyadic rows); the change also keeps zero-probability tokens on "
        "rows with p = 1"),
    Mutation(
        "pt-topp-sign", "comparison", "top-p compares with p - 1 instead of 1 - p",
        _TOPP, _TOPP.replace("1 - p.unsqueeze(dim=1)", "p.unsqueeze(dim=1) - 1"),
        target=f"{_PT}: top-p threshold",
        principle="the threshold's sign: p - 1 <= 0 turns top-p off on every row"),
    Mutation(
        "pt-topp-cumsum-exclusive", "off-by-one", "top-p's cumulative sum excludes the token",
        _CUMSUM, "probs_sum = torch.cumsum(probs_sort, dim=-1) - probs_sort",
        target=f"{_PT}: top-p cumulative sum",
        principle="the mass at and below a token decides it: the mass strictly below drops "
        "the nucleus's smallest token"),
    Mutation(
        "pt-topp-keep-one-dropped", "dropped-clause", "the keep-at-least-one line dropped",
        _KEEP_ONE, "pass",
        target=f"{_PT}: top-p keep at least one",
        principle="where 1 - p rounds to 1 in float32 (p below 2^-25) every cumulative sum "
        "is <= 1 - p and only this line keeps the row's maximum"),
    Mutation(
        "pt-topp-keep-two", "off-by-one", "top-p keeps at least two tokens",
        _KEEP_ONE, "top_p_mask[:, -2:] = False",
        target=f"{_PT}: top-p keep at least one",
        principle="a nucleus of one token (a forced token, p near 0) keeps one"),
    Mutation(
        "pt-prec-softmax-f64", "precision", "top-p's probabilities in float64",
        _SOFTMAX, "probs_sort = logits_sort.softmax(dim=-1, dtype=torch.float64)",
        target=f"{_PT}: top-p softmax and cumulative sum dtype",
        principle="float32 is the base's precision: float64 moves the boundary only where "
        "float32 rounding decides it, and there it is nearer the binary64 oracle, which "
        "regression/v2 does not blame on a change; likely to survive with rows changed"),
    Mutation(
        "pt-prec-cumsum-bf16", "precision", "top-p's cumulative sum in bfloat16",
        _CUMSUM, "probs_sum = torch.cumsum(probs_sort.bfloat16(), dim=-1).float()",
        target=f"{_PT}: top-p cumulative sum dtype",
        principle="a cumulative sum with 8 significant bits misplaces the boundary on "
        "ordinary rows"),
    Mutation(
        "pt-scatter-dropped", "dropped-clause", "the sorted row returned, not scattered back",
        "return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)",
        "return logits_sort",
        target=f"{_PT}: scatter back",
        principle="the kept set is of token ids: the sorted row must go back to id order"),
    Mutation(
        "pt-allow-cpu-sync-default", "constant", "allow_cpu_sync defaults to True",
        "allow_cpu_sync: bool = False,", "allow_cpu_sync: bool = True,",
        target=f"{_PT}: dispatch to {_ONLY}",
        principle="the path is part of the claim: top-k-only batches then take "
        "apply_top_k_only (a CPU server's path), which the family's observer reports as not "
        "the sort path; its kept sets equal the sort's (both keep every tie at the k-th "
        "value), so the outputs may equal the base's"),
    Mutation(
        "pt-only-kindex", "off-by-one", "apply_top_k_only reads the (k+1)-th value",
        "k_index = k.sub_(1).unsqueeze(1)", "k_index = k.sub_(0).unsqueeze(1)",
        target=f"{_ONLY}: k-th value index",
        principle=_UNREACHED),
    Mutation(
        "pt-only-mask-le", "comparison", "apply_top_k_only masks logits <= the k-th value",
        'return logits.masked_fill_(logits < top_k_mask, -float("inf"))',
        'return logits.masked_fill_(logits <= top_k_mask, -float("inf"))',
        target=f"{_ONLY}: mask",
        principle=_UNREACHED),
)

# --- topp-gate/mutants/flashinfer-v1: FlashInfer 0.7.2.post1's CUDA headers (issue 39) -----
# The paths vLLM 0.33.0 and SGLang call (harness.families.flashinfer): top_p_sampling_from_probs
# (TopPSamplingFromProbKernel), top_k_sampling_from_probs (TopKSamplingFromProbKernel),
# top_k_top_p_sampling_from_logits (top_k_mask_logits, then a softmax, then top-p sampling: the
# child passes indices, so FlashInfer's fast path is never taken), top_p_renorm_probs
# (TopPRenormProbKernel below 2048 tokens, air_top_p.cuh above), top_k_renorm_probs and
# top_k_mask_logits (topk.cuh's radix select, single-CTA when a row fits one CTA's shared
# memory, else multi-CTA: about 57K float32 entries a CTA on an H100 or H200).

_TOPK_SAMPLE = "sampling.cuh TopKSamplingFromProbKernel"
_TOPP_SAMPLE = "sampling.cuh TopPSamplingFromProbKernel"
_TOPP_RENORM = "sampling.cuh TopPRenormProbKernel"
_RADIX = "topk.cuh RadixSelectFromSharedMemory"
_MASK = "topk.cuh RadixTopKMaskLogitsKernel_MultiCTA"
_RENORM_K = "topk.cuh RadixTopKRenormProbKernel_MultiCTA"
_RENORM_KEEP = ("data_vec[j] = (data_vec[j] >= pivot) ? DType(float(data_vec[j]) * "
                "normalizer) : DType(0);")
_MULTI_CTA = ("killed only where a row needs several CTAs (vocabulary above one CTA's shared "
              "memory, about 57K float32 tokens on an H100 or H200: 128256, 151936, 262144)")
_VALUES_ONLY = ("the gate judges which tokens a renorm keeps (output probability nonzero), not "
                "the renormalized values, so a change of values alone is equivalent for it: "
                "expected to survive, kept to say so")

FLASHINFER_V1: tuple[Mutation, ...] = (
    # sampling.cuh: top-k and top-p sampling (rejection sampling with two pivots a round)
    Mutation(
        "fi-topk-samp-accept-le", "comparison",
        "top-k sampling accepts a pivot with k tokens above it",
        "if (aggregate_gt_pivot_0.count < k) {", "if (aggregate_gt_pivot_0.count <= k) {",
        target=f"{_TOPK_SAMPLE}: pivot acceptance (case 1)", path=FI_SAMPLING_CUH,
        principle="a drawn token is accepted only when fewer than k tokens lie strictly "
        "above it; accepting it with k above draws the (k+1)-th token, outside the top-k "
        "support (k = 1 draws a token below the maximum)"),
    Mutation(
        "fi-topp-samp-accept-le", "comparison",
        "top-p sampling accepts a pivot whose mass above equals p",
        "if (aggregate_gt_pivot_0 < top_p) {", "if (aggregate_gt_pivot_0 <= top_p) {",
        target=f"{_TOPP_SAMPLE}: pivot acceptance (case 1)", path=FI_SAMPLING_CUH,
        principle="the nucleus is the smallest set whose mass reaches p: a token whose mass "
        "strictly above equals p exactly lies outside it. Differs only where the float32 mass "
        "above a drawn token equals p exactly (dyadic rows): may survive on a matrix without "
        "them"),
    Mutation(
        "fi-topp-samp-row-index", "off-by-one",
        "top-p sampling reads p at the output index, not the row's",
        "float top_p = (top_p_arr == nullptr) ? top_p_val : top_p_arr[row_idx];",
        "float top_p = (top_p_arr == nullptr) ? top_p_val : top_p_arr[bx];",
        target=f"{_TOPP_SAMPLE}: per-row top-p", path=FI_SAMPLING_CUH,
        principle="each output draws with the top-p of its input row (indices[bx]); the child "
        "draws 64 outputs per row through indices, so outputs past the batch read p past the "
        "array and rows with different p swap theirs"),
    # sampling.cuh: top-p renorm (ternary search for the nucleus boundary, vocabulary < 2048)
    Mutation(
        "fi-topp-renorm-low-gt", "comparison",
        "top-p renorm raises low only when the mass above pivot_1 exceeds p",
        "if (aggregate_gt_pivot_1 >= p) {", "if (aggregate_gt_pivot_1 > p) {",
        target=f"{_TOPP_RENORM}: search step", path=FI_SAMPLING_CUH,
        principle="mass exactly p above a pivot still holds the nucleus; with '>' the search "
        "can end below the boundary and keep one token too many where a mass equals p "
        "exactly (dyadic rows; may survive without them)"),
    Mutation(
        "fi-topp-renorm-mid-gt", "comparison",
        "top-p renorm moves to pivot_0 only when the mass above it exceeds p",
        "} else if (aggregate_gt_pivot_0 >= p) {", "} else if (aggregate_gt_pivot_0 > p) {",
        target=f"{_TOPP_RENORM}: search step", path=FI_SAMPLING_CUH,
        principle="as fi-topp-renorm-low-gt for the lower pivot; the else branch then lowers "
        "high below a boundary that held exactly p"),
    Mutation(
        "fi-topp-renorm-keep-ge", "comparison", "top-p renorm keeps probabilities >= low",
        "probs_vec[j] = (probs_vec[j] > low) ? probs_vec[j] * normalizer : 0;",
        "probs_vec[j] = (probs_vec[j] >= low) ? probs_vec[j] * normalizer : 0;",
        target=f"{_TOPP_RENORM}: final keep predicate", path=FI_SAMPLING_CUH,
        principle="the boundary low is excluded: where the search never raises low (p near "
        "1) every zero-probability token (grammar-masked, or underflowed beside a forced "
        "token) is kept with renormalized probability 0 * normalizer = 0, so the kept set "
        "(nonzero) is unchanged; it differs where low lands exactly on a token's probability"
        ", rare: may survive"),
    Mutation(
        "fi-topp-renorm-fastpath-gt", "constant", "top-p renorm's p >= 1 fast path only above 1",
        "if (p >= 1.0f) {", "if (p > 1.0f) {",
        target=f"{_TOPP_RENORM}: p = 1 fast path", path=FI_SAMPLING_CUH,
        principle="p = 1 keeps every token of nonzero probability. Argued likely equivalent: "
        "the search with p = 1 keeps the same set unless the float32 mass above a pivot "
        "rounds to 1 or more, where it drops the smallest tokens"),
    Mutation(
        "fi-topp-renorm-norm-1", "constant", "top-p renorm's normalizer floor 1 instead of 1e-8",
        "float normalizer = math::ptx_rcp(max(sum_low, 1e-8));",
        "float normalizer = math::ptx_rcp(max(sum_low, 1.0));",
        target=f"{_TOPP_RENORM}: normalizer", path=FI_SAMPLING_CUH,
        principle="the kept probabilities are not renormalized (sum_low <= 1). Equivalent for "
        "this gate: " + _VALUES_ONLY),
    # topk.cuh: the radix select behind top-k mask, top-k renorm and top-k-top-p sampling
    Mutation(
        "fi-radix-k-plus-1", "off-by-one", "the radix select finds the (k+1)-th value",
        "remaining_k_cache = k;", "remaining_k_cache = k + 1;",
        target=f"{_RADIX}: k count", path=FI_TOPK_CUH,
        principle="the pivot is the k-th largest value: the (k+1)-th keeps one token more "
        "(a whole tie group more) on every top-k row with k < V"),
    Mutation(
        "fi-radix-remaining-k-plus-1", "off-by-one",
        "each radix round carries one more remaining k",
        "remaining_k_cache = found_remaining_k;", "remaining_k_cache = found_remaining_k + 1;",
        target=f"{_RADIX}: remaining k between rounds", path=FI_TOPK_CUH,
        principle="after each byte, k minus the count strictly above the chosen bucket: one "
        "more picks a lower bucket where the k-th and (k+1)-th values share their high bytes "
        "and differ in a later one (close float32 values), keeping tokens below the k-th"),
    Mutation(
        "fi-radix-suffix-half", "constant", "the radix suffix sum stops one doubling early",
        "for (uint32_t stride = 1; stride < RADIX; stride *= 2) {",
        "for (uint32_t stride = 1; stride < RADIX / 2; stride *= 2) {",
        target="topk.cuh RadixSuffixSum: search steps", path=FI_TOPK_CUH,
        principle="a bucket's count of values at or above it must sum all 256 buckets above "
        "it; 7 doublings sum only 128, so where a row's values span more than 128 buckets of "
        "a byte (mixed-sign logits in the first byte) the threshold bucket is wrong"),
    Mutation(
        "fi-radix-gt-count-ge", "comparison", "the radix select counts values >= the pivot",
        "if (ordered > ordered_pivot) {", "if (ordered >= ordered_pivot) {",
        target=f"{_RADIX}: count above the pivot", path=FI_TOPK_CUH,
        principle="argued equivalent on the gated paths: top-k mask and top-k renorm pass "
        "this count to a variable they never read (local_gt_count, 'not used in this "
        "kernel'); only FlashInfer's top_k index kernels use it. Expected to survive, kept to "
        "say so"),
    Mutation(
        "fi-mask-keep-gt", "comparison", "top-k mask keeps logits > the k-th value",
        "logits_vec[j] = (logits_vec[j] >= pivot) ? logits_vec[j] : neg_inf;",
        "logits_vec[j] = (logits_vec[j] > pivot) ? logits_vec[j] : neg_inf;",
        target=f"{_MASK}: keep predicate", path=FI_TOPK_CUH,
        principle="the k-th value itself is kept: '>' keeps k - 1 tokens (none for k = 1) on "
        "top-k mask and on top-k-top-p sampling, which masks first"),
    Mutation(
        "fi-renorm-keep-gt", "comparison", "top-k renorm keeps probabilities > the k-th",
        _RENORM_KEEP, _RENORM_KEEP.replace("(data_vec[j] >= pivot)", "(data_vec[j] > pivot)"),
        target=f"{_RENORM_K}: keep predicate", path=FI_TOPK_CUH,
        principle="the k-th probability itself is kept: '>' keeps k - 1 tokens"),
    Mutation(
        "fi-renorm-sum-gt", "comparison",
        "top-k renorm's normalizer sums probabilities > the k-th",
        "if (data_vec[j] >= pivot) {", "if (data_vec[j] > pivot) {",
        target=f"{_RENORM_K}: normalizer sum", path=FI_TOPK_CUH,
        principle="the sum leaves out the k-th probability, so the kept values are too "
        "large; the kept set is the same. Equivalent for this gate: " + _VALUES_ONLY),
    Mutation(
        "fi-renorm-fp16-values", "precision", "top-k renorm's kept values rounded to float16",
        _RENORM_KEEP, _RENORM_KEEP.replace(
            "DType(float(data_vec[j]) * normalizer)",
            "DType(__half2float(__float2half(float(data_vec[j]) * normalizer)))"),
        target=f"{_RENORM_K}: output precision", path=FI_TOPK_CUH,
        principle="float16 flushes a renormalized probability below 2^-25 to 0, which drops "
        "a kept token (kept = nonzero): killed where k keeps tokens that small (large k on "
        "a peaked 128K row); elsewhere the values change only, which the gate does not judge"),
    Mutation(
        "fi-hist-reset-skip-first", "dropped-clause",
        "the multi-CTA reset leaves the first histogram buffer uncleared",
        "for (uint32_t buf = 0; buf < 3; ++buf) {", "for (uint32_t buf = 1; buf < 3; ++buf) {",
        target="topk.cuh RadixGroupResetStateLastCTA: histogram reset", path=FI_TOPK_CUH,
        principle="the next launch's first radix round adds into buffer 0, which no CTA "
        "clears before it (each round clears only the next round's buffer): the last round "
        "of a launch leaves counts there, so the next multi-CTA call on the device finds a "
        "wrong threshold (the class of bug FlashInfer PR #2325 fixed). The child runs its "
        "cases one after another in one process: " + _MULTI_CTA),
    Mutation(
        "fi-hist-reset-two-buffers", "off-by-one",
        "the multi-CTA reset clears two of the three histogram buffers",
        "for (uint32_t buf = 0; buf < 3; ++buf) {", "for (uint32_t buf = 0; buf < 2; ++buf) {",
        target="topk.cuh RadixGroupResetStateLastCTA: histogram reset", path=FI_TOPK_CUH,
        principle="argued likely equivalent: a launch starts in buffer 0 and each round "
        "clears the next round's buffer before the barrier, so buffer 2 is cleared in-launch "
        "before its first use; kept to show the reset's one load-bearing buffer"),
    Mutation(
        "fi-mask-multi-as-single", "constant",
        "top-k mask launches the single-CTA kernel for a multi-CTA row",
        "RadixTopKMaskLogitsKernel_MultiCTA<BLOCK_THREADS, VEC_SIZE, false, DType, IdType>;",
        "RadixTopKMaskLogitsKernel_MultiCTA<BLOCK_THREADS, VEC_SIZE, true, DType, IdType>;",
        target="topk.cuh RadixTopKMaskLogitsMultiCTA: single- or multi-CTA choice",
        path=FI_TOPK_CUH,
        principle="a row split over several CTAs needs their histograms summed: each CTA "
        "then selects the top k of its own chunk, keeping up to k per chunk; " + _MULTI_CTA),
    Mutation(
        "fi-mask-single-as-multi", "constant",
        "top-k mask launches the multi-CTA kernel for a one-CTA row",
        "RadixTopKMaskLogitsKernel_MultiCTA<BLOCK_THREADS, VEC_SIZE, true, DType, IdType>;",
        "RadixTopKMaskLogitsKernel_MultiCTA<BLOCK_THREADS, VEC_SIZE, false, DType, IdType>;",
        target="topk.cuh RadixTopKMaskLogitsMultiCTA: single- or multi-CTA choice",
        path=FI_TOPK_CUH,
        principle="argued likely equivalent: the multi-CTA kernel with one CTA a group sums "
        "one histogram through the row state and passes its barrier alone; it selects the "
        "same pivot (a failure would be a hang or a crash, not a wrong set)"),
    Mutation(
        "fi-renorm-path-swapped", "comparison",
        "top-k renorm takes the multi-CTA kernel exactly when one CTA suffices",
        "if (!single_cta) {", "if (single_cta) {",
        target="topk.cuh RadixTopKRenormProbMultiCTA: single- or multi-CTA choice",
        path=FI_TOPK_CUH,
        principle="the choice must follow the row's CTA count: swapped, a multi-CTA row runs "
        "the single-CTA kernel (top k per chunk); " + _MULTI_CTA),
)

CATALOGUES: Mapping[str, tuple[Mutation, ...]] = MappingProxyType(
    {V1_ID: V1, V2_ID: V2, PYTORCH_V1_ID: PYTORCH_V1, FLASHINFER_V1_ID: FLASHINFER_V1})
# each catalogue's kernel file: the patched side must pin it (its family's kernel_path); an
# entry mutates it unless its ``path`` names another file of the pinned set
KERNEL_PATHS: Mapping[str, str] = MappingProxyType(
    {V1_ID: TRITON_PATH, V2_ID: TRITON_PATH, PYTORCH_V1_ID: SAMPLER_PATH,
     FLASHINFER_V1_ID: FLASHINFER_PATH})


def mutation_path(catalogue_id: str, mutation: Mutation) -> str:
    """The pinned file ``mutation`` of catalogue ``catalogue_id`` mutates."""
    return mutation.path or KERNEL_PATHS[catalogue_id]
