"""vLLM's own acceptance criterion for its Triton top-k/top-p kernel, side by side with the gate.

REIMPLEMENTATION, labelled as such. vLLM's Triton top-k/top-p comparison test (cited by the
seed document, ``seed/000_2bb395c3a47288c9.txt``: "Official Triton comparison tests, lines
268-310 ... lines 281-290 construct both results and cast p to fp32; lines 291-309 compare
kept counts and permit a batch maximum difference of three, otherwise less than 0.5% of that
batch's maximum reference kept count") is not in the wheel, so its comparison is rewritten
here from that description:

* the reference is vLLM's own PyTorch sort path, ``apply_top_k_top_p_pytorch`` from
  ``vllm/v1/sample/ops/topk_topp_sampler.py`` of the *same pinned release* (0.33.0: file
  sha256 :data:`SAMPLER_SHA256`, read from the pinned wheel, or from a file the caller names
  whose sha256 must be that), run on a CPU on the same captured float32 logits and the same
  float32 p bytes the kernels read; only that function's source is taken from the file (by
  ``ast``) and executed with ``torch`` alone, so its import closure (``vllm.envs``, the
  platform, ...) is not needed;
* per captured case (one batch): kept counts (positions not ``-inf``) of the reference and of
  the kernel's output; the batch passes when ``max |ref - kernel| <= 3``, or else when that
  maximum is below 0.5% of the batch's largest reference count (``200 * diff < max_ref``, in
  integers); a mutant is killed when any batch fails (or its output is missing).

The kernel's output comes from a bundle opened after ``verify`` (digest-checked bytes).
"""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path
from typing import Any

from ..core.digest import sha256_hex
from ..core.errors import SourcesError

SAMPLER_PATH = "vllm/v1/sample/ops/topk_topp_sampler.py"
SAMPLER_SHA256 = "a8234f8dc8180c7b7d2417d4d04ca4af25bd2761dc93332f7bd2993a19c2120f"  # 0.33.0
WHEEL_SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"  # 0.33.0
FUNCTION = "apply_top_k_top_p_pytorch"
LABEL = ("reimplementation of vLLM's Triton top-k/top-p comparison test (batch count "
         "envelope: max diff <= 3, else < 0.5% of the batch's max reference count) against "
         f"vLLM 0.33.0's {FUNCTION}")


def sampler_source(file: Path | None = None, cache: Path | None = None) -> bytes:
    """The pinned release's ``topk_topp_sampler.py``: ``file`` (its sha256 checked), or the
    member of the cached 0.33.0 wheel (the wheel's sha256 checked first)."""
    if file is None:
        from ..pins.sources import cache_root

        folder = cache_root(cache) / "wheels" / WHEEL_SHA256
        wheels = sorted(folder.glob("vllm-0.33.0-*.whl")) if folder.is_dir() else []
        if not wheels:
            raise SourcesError(f"vLLM 0.33.0's wheel is not in the cache ({folder}); give "
                               f"{SAMPLER_PATH} with --vllm-sampler")
        if sha256_hex(wheels[0].read_bytes()) != WHEEL_SHA256:
            raise SourcesError(f"{wheels[0]}: not the pinned vLLM 0.33.0 wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = wheel.read(SAMPLER_PATH)
    else:
        data = file.read_bytes()
    if sha256_hex(data) != SAMPLER_SHA256:
        raise SourcesError(f"{SAMPLER_PATH}: sha256 {sha256_hex(data)} is not vLLM 0.33.0's "
                           f"{SAMPLER_SHA256}")
    return data


def sort_path(source: bytes) -> tuple[Any, str]:
    """vLLM's ``apply_top_k_top_p_pytorch`` compiled from its own source (that function
    alone, with ``torch`` as its only global), and the sha256 of that source segment."""
    import torch

    text = source.decode("utf-8")
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
            segment = ast.get_source_segment(text, node)
            break
    else:
        raise SourcesError(f"{SAMPLER_PATH} defines no {FUNCTION}")
    assert segment is not None
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(segment, f"{SAMPLER_PATH}:{FUNCTION}", "exec"), namespace)  # noqa: S102
    return namespace[FUNCTION], sha256_hex(segment.encode("utf-8"))


def reference_counts(function: Any, logits: bytes, p: bytes, batch: int,
                     vocab: int) -> list[int]:
    """Kept counts of vLLM's sort path on the captured bytes (CPU, float32, p as float32)."""
    import torch

    x = torch.frombuffer(bytearray(logits), dtype=torch.float32).reshape(batch, vocab).clone()
    pp = torch.frombuffer(bytearray(p), dtype=torch.float32).clone()
    out = function(x, None, pp)
    return [int(c) for c in (out != float("-inf")).sum(dim=1).tolist()]


def kept_counts(output: bytes, batch: int, vocab: int) -> list[int]:
    """Kept counts (positions not -inf) of a kernel's output bytes, per row."""
    import torch

    out = torch.frombuffer(bytearray(output), dtype=torch.float32).reshape(batch, vocab)
    return [int(c) for c in (out != float("-inf")).sum(dim=1).tolist()]


def batch_passes(reference: list[int], kernel: list[int]) -> tuple[bool, int, int]:
    """(passes, max |ref - kernel|, max reference count) for one batch."""
    diff = max(abs(a - b) for a, b in zip(reference, kernel, strict=True))
    top = max(reference)
    return diff <= 3 or 200 * diff < top, diff, top


def criterion_of_bundle(view: Any, options: Any) -> dict[str, Any]:
    """vLLM's criterion on every captured case of a verified bundle (its patched output)."""
    source = sampler_source(getattr(options, "vllm_sampler", None), options.cache)
    function, function_sha = sort_path(source)
    cases = json.loads(view.raw("cases.json"))["cases"]
    batches = []
    for case in cases:
        cid, vocab, batch = case["id"], int(case["vocab"]), len(case["rows"])
        ref = reference_counts(function, view.raw(case["logits"]), view.raw(case["p"]),
                               batch, vocab)
        try:
            out = view.raw(f"outputs/patched/{cid}.out.f32")
        except Exception:  # noqa: BLE001 - no output (a crashed kernel) fails the batch
            batches.append({"case": cid, "passes": False, "reason": "no output"})
            continue
        ok, diff, top = batch_passes(ref, kept_counts(out, batch, vocab))
        batches.append({"case": cid, "passes": ok, "max_diff": diff, "max_reference": top})
    return {"label": LABEL, "function_sha256": function_sha, "sampler_sha256": SAMPLER_SHA256,
            "batches": batches, "killed": not all(b["passes"] for b in batches)}
