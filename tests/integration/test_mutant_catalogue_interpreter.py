"""Catalogue v2's monolithic mutants change what the kernel does (Triton's interpreter, CPU).

A mutant no input can tell apart from the base teaches nothing; this checks that a sample
of ``topp-gate/mutants/v2``'s ``_topk_topp_kernel`` entries, applied by
:func:`harness.mutation.mutate.mutate` to the pinned vLLM 0.33.0 kernel, change some output
(or crash) on one small batch with top-k: ties split by the k-th logit across both tiles,
top-k then top-p, standalone top-p (k = V) and top-k alone.

To stay at a few seconds of CPU it does not import vLLM: the kernel's own source text (its
two tables, ``_update_min_larger_stats`` and ``_topk_topp_kernel``, base or mutated) is
written to a module and launched as vLLM's CPU dispatch launches it (``BLOCK_SIZE`` 256,
``BLOCK_SIZE_TRUNC`` 128), with the kernel child's interpreter shim for ``tl.range``. The
gate's own runs (``topp-gate mutate``) import the whole mutated module in kernel children.

Each launch is a process of its own (this file run as a script, ``TRITON_INTERPRET=1``):
Triton reads the variable when ``triton.language`` is first imported, so a pytest process
that imported Triton before (an xdist worker that ran other files) cannot interpret
``tl.sum`` ("Cannot call @triton.jit'd outside of the scope of a kernel").
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.digest import sha256_hex
from harness.core.errors import HarnessError
from harness.mutation.mutant_catalogue import CATALOGUES, V2_ID, Mutation
from harness.mutation.mutate import mutate
from harness.pins import sources

pytestmark = [pytest.mark.slow, pytest.mark.sources]

KERNEL_SHA256 = "6264a524884274824b65c3a3a91d4d34418561cde566c31879cb394acd85f2ef"
PIECES = ("_NORMAL_CDF_TO_SIGMA_TABLE", "_PERCENTILE_TO_STD_TABLE", "_update_min_larger_stats",
          "_topk_topp_kernel")
VOCAB = 512
# (k, p) per row: 6 of 9 tokens tied at the k-th logit (3 ties in each tile), top-k then
# top-p, standalone top-p (k = V), top-k alone
SAMPLING = ((6, 1.0), (50, 0.8), (VOCAB, 0.7), (20, 1.0))
# mutants each row above should tell apart from the base
SAMPLE = ("mk-topk-keep-minus1", "mk-final-dup-carry", "mk-kp-pivot-no-sum",
          "mk-kp-budget-plus1", "mk-p-max-sample-100")


def _pieces(kernel: str) -> str:
    """The module source of the kernel's tables and monolithic kernel, decorators kept."""
    lines = kernel.splitlines(keepends=True)
    out = ["import triton\nimport triton.language as tl\n\n"]
    for node in ast.parse(kernel).body:
        if isinstance(node, ast.FunctionDef):
            name, first = node.name, min([node.lineno] + [d.lineno for d in node.decorator_list])
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, first = node.targets[0].id, node.lineno
        else:
            continue
        if name in PIECES:
            out.append("".join(lines[first - 1:node.end_lineno]) + "\n\n")
    assert len(out) == 1 + len(PIECES)
    return "".join(out)


def _write(kernel: str, name: str, folder: Path) -> Path:
    path = folder / f"{name.replace('-', '_')}.py"
    path.write_text(_pieces(kernel), encoding="utf-8")
    return path


def _import(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # triton reads the source through inspect
    spec.loader.exec_module(module)
    return module


def _batch() -> Any:
    import torch

    g = torch.Generator().manual_seed(7)
    logits = (torch.randn(len(SAMPLING), VOCAB, generator=g) * 2).to(torch.bfloat16).float()
    logits[0] = torch.randn(VOCAB, generator=g) * 0.5 - 3.0
    logits[0, [10, 300, 400]] = 4.0
    logits[0, [20, 40, 60, 280, 320, 500]] = 2.0  # 3 ties in each 256-wide tile
    return logits


def _run(module: Any) -> list[list[float]]:
    import torch

    logits = _batch()
    k = torch.tensor([k for k, _ in SAMPLING], dtype=torch.int32)
    p = torch.tensor([p for _, p in SAMPLING], dtype=torch.float32)
    buffer = torch.empty(len(SAMPLING), VOCAB)
    module._topk_topp_kernel[(len(SAMPLING),)](
        logits, logits.stride(0), buffer, torch.tensor(module._PERCENTILE_TO_STD_TABLE),
        torch.tensor(module._NORMAL_CDF_TO_SIGMA_TABLE), k, p, len(SAMPLING),
        VOCAB_SIZE=VOCAB, MASK_VALUE=-math.inf, BLOCK_SIZE=256, BLOCK_SIZE_TRUNC=128,
        TOPK_ENABLED=True, TOPP_ENABLED=True, SPLIT_COVERS_PONLY=False)
    out: list[list[float]] = logits.tolist()
    return out


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path]:
    pins = sources.load_pins()
    side = pins.side("patched")
    try:
        tree = sources.resolve_tree(side, cache=sources.cache_root())
    except HarnessError as err:
        pytest.skip(f"vLLM 0.33.0 sources: {err}")
    raw = (tree / side.kernel_path).read_bytes()
    assert side.version == "0.33.0" and sha256_hex(raw) == KERNEL_SHA256
    return raw, tmp_path_factory.mktemp("mono")


class LaunchFailed(Exception):
    """The interpreted kernel crashed (or could not be imported) in its process."""


def launch(path: Path) -> list[list[float]]:
    """The kernel module at PATH run on :func:`_batch` in Triton's interpreter, in a fresh
    process (this file as a script); its output rows."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, __file__, str(path)], env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise LaunchFailed(done.stderr[-2000:])
    out: list[list[float]] = json.loads(done.stdout)
    return out


def _entry(mid: str) -> Mutation:
    (entry,) = [m for m in CATALOGUES[V2_ID] if m.id == mid]
    return entry


@pytest.fixture(scope="module")
def base(kernel) -> list[list[float]]:
    raw, folder = kernel
    return launch(_write(raw.decode("utf-8"), "base", folder))


def test_the_base_keeps_what_the_batch_was_built_for(base):
    out = base
    kept = [[i for i, v in enumerate(row) if v != -math.inf] for row in out]
    assert kept[0] == [10, 20, 40, 60, 300, 400]  # 3 at 4.0, then the lowest-id 3 ties
    assert len(kept[3]) == 20
    assert 0 < len(kept[1]) < 50 and 0 < len(kept[2]) < VOCAB
    logits = _batch().tolist()
    assert all(out[r][i] == logits[r][i] for r in range(len(out)) for i in kept[r])


def test_a_sample_of_monolithic_mutants_changes_an_output(kernel, base):
    raw, folder = kernel
    unchanged = []
    for mid in SAMPLE:
        mutated = mutate(raw, _entry(mid)).decode("utf-8")
        try:
            out = launch(_write(mutated, mid, folder))
        except LaunchFailed:  # a mutant that crashes is told apart
            continue
        if out == base:
            unchanged.append(mid)
    assert unchanged == []


if __name__ == "__main__":  # one launch, in the process :func:`launch` starts
    from harness.families.vllm_triton import interpreter_loop_tensors

    interpreter_loop_tensors()
    print(json.dumps(_run(_import(Path(sys.argv[1])))))
