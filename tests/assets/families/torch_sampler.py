"""A test-only sampling family, ``torch-sampler``: registered from outside ``harness/``.

Two dispatch paths, as FlashInfer has: ``sample`` draws :data:`DRAWS` tokens per row (a
sampling path: the output row holds the input logit at every drawn token, -inf elsewhere, and
the per-row draw counts go into the case's evidence), and ``mask`` (a deterministic top-k then
top-p mask). Each is proven by observing that its entry ran exactly once. Like FlashInfer's,
it draws with the manifest's declared draws per row, seed and offset when the cases index
carries them (``declare_sampling``; the CPU generator is seeded with seed + offset), else
with :data:`DRAWS` and :data:`SEED`. The kernel's sources
live in ``torch_sampler_tree/`` beside this file; tests gate a pull request to it with rule set
``regression-support/v1`` end to end on the CPU, where FlashInfer cannot run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness import families

TREE = Path(__file__).resolve().parent / "torch_sampler_tree"
DRAWS = 64
SEED = 20261201


class _Observer:
    def __init__(self, entry: Any, family: TorchSampler) -> None:
        self.code, self.family, self.calls = entry.__code__, family, 0

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self.code:
            self.calls += 1

    def __enter__(self) -> _Observer:
        self.calls, self.family.draws = 0, None
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def proof(self, batch: int) -> dict[str, Any]:
        problems = [] if self.calls == 1 else [f"entry ran {self.calls} times"]
        proof = {"entry_point": self.code.co_name, "entry_calls": self.calls,
                 "observed_by": "sys.setprofile on code objects", "proven": not problems,
                 "problems": problems}
        if self.family.draws is not None:  # the child moves "draws" into the case record
            count, seed, offset = self.family.drawing
            proof.update(draws=self.family.draws, draws_per_row=count, seed=seed, offset=offset)
        return proof


class TorchSampler(families.Family):
    id = "torch-sampler"
    package = "torch_sampler_kernel"
    kernel_path = "torch_sampler_kernel/sample.py"
    kernel_module = "torch_sampler_kernel.sample"
    closure_roots = ("torch_sampler_kernel.sample",)
    dispatch_paths = ("sample", "mask")
    default_dispatch = "sample"
    sampling_paths = ("sample",)
    draws: list[list[list[int]]] | None = None
    drawing: tuple[int, int, int] = (DRAWS, SEED, 0)

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        return {"draws_per_row": DRAWS, "seed": SEED}

    def declare_sampling(self, sampling: Any) -> dict[str, Any]:
        self.drawing = (sampling["draws_per_row"], sampling["seed"], sampling["offset"])
        return dict(sampling)

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        return _Observer(getattr(module, dispatch), self)

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        import torch

        batch, vocab = logits.shape
        k = torch.full((batch,), vocab) if k is None else k.to(torch.int64)
        p = torch.ones(batch) if p is None else p
        if dispatch == "mask":
            return module.mask(logits, k, p)
        count, seed, offset = self.drawing
        drawn = module.sample(logits, k, p, count, (seed + offset) % (1 << 64))
        self.draws = [[[int(t), int(c)] for t, c in zip(*row.unique(return_counts=True),
                                                         strict=True)] for row in drawn]
        kept = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, drawn, True)
        return torch.where(kept, logits, torch.full_like(logits, float("-inf")))


FAMILY = families.register(TorchSampler(), path=Path(__file__).resolve().parent)
