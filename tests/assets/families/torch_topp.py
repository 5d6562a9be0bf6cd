"""A test-only kernel family, ``torch-topp``: registered from outside ``harness/``.

It shows the seam (:mod:`harness.families`): a family is one module that says
what to pin (package ``torch_topp_kernel``, kernel file ``torch_topp_kernel/topp.py``), how
the kernel child imports it, the entry it calls with ``(logits, k, p)`` and its one
dispatch path, ``sort``, proven by observing (``sys.setprofile`` on the entry's code
object, no change to the module) that the entry ran exactly once, without top-k.
The kernel's sources live in ``torch_topp_tree/`` beside this file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness import families

TREE = Path(__file__).resolve().parent / "torch_topp_tree"


class EntryObserver:
    def __init__(self, entry: Any) -> None:
        self.code = entry.__code__
        self.calls: list[bool] = []

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self.code:
            self.calls.append(frame.f_locals.get("k") is None)

    def __enter__(self) -> EntryObserver:
        self.calls = []
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def proof(self, batch: int) -> dict[str, Any]:
        problems = []
        if len(self.calls) != 1:
            problems.append(f"entry ran {len(self.calls)} times")
        elif not self.calls[0]:
            problems.append("entry ran with a top-k tensor")
        return {"entry_point": "top_p_mask", "observed_by": "sys.setprofile on code objects",
                "entry_calls": len(self.calls), "proven": not problems,
                "problems": problems}


class TorchTopP(families.Family):
    id = "torch-topp"
    package = "torch_topp_kernel"
    kernel_path = "torch_topp_kernel/topp.py"
    kernel_module = "torch_topp_kernel.topp"
    closure_roots = ("torch_topp_kernel.topp",)
    dispatch_paths = ("sort",)
    default_dispatch = "sort"

    def package_info(self, module: Any, loaded: list[str]) -> dict[str, Any]:
        return {"torch_topp_modules_loaded": len(loaded)}

    def observer(self, module: Any, dispatch: str, backend: str, num_sm: int) -> Any:
        return EntryObserver(module.top_p_mask)

    def call(self, module: Any, dispatch: str, backend: str, logits: Any, k: Any, p: Any,
             num_sm: int) -> Any:
        return module.top_p_mask(logits, k, p)


FAMILY = families.register(TorchTopP(), path=Path(__file__).resolve().parent)
