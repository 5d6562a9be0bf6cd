"""A kernel family that exists only in the tests (``torch-topp``, a pure-torch sort-based
top-p mask, tests/assets/families/torch_topp.py) runs through the same pinning, private
copy and kernel runner as vLLM's Triton kernel, registered without editing ``harness/``.

Pinned with ``sources pin``'s function (its family written into the pin file, its
``kernel_path`` checked against the family), run in a real kernel child (the Triton
interpreter's environment, CPU), its one dispatch path ``sort`` proven by observation and
read back by the same reader the verifier uses (``harness.core.names.proven_cases``).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets" / "families"))
import torch_topp  # noqa: E402  (registers the family "torch-topp")

from harness import families  # noqa: E402
from harness.core.errors import SourcesError, UsageError  # noqa: E402
from harness.core.f32 import rows, to_float32  # noqa: E402
from harness.core.names import proven_cases  # noqa: E402
from harness.core.oracle import Certified, reference  # noqa: E402
from harness.kernels.runner import run_side  # noqa: E402
from harness.pins.pinfile import load_pin_file, parse_pin_file, pin_bytes  # noqa: E402
from harness.pins.pinning import pin  # noqa: E402

VOCAB = 64
ROWS = [(3, 0.9), (None, 0.5), (None, 0.95)]  # (forced id or None, p)


def _cases(root: Path) -> tuple[Path, bytes]:
    import torch

    g = torch.Generator().manual_seed(7)
    logits = torch.randn(len(ROWS), VOCAB, generator=g)
    for row, (forced, _) in enumerate(ROWS):
        if forced is not None:
            logits[row, forced] = 1e30
    p = torch.tensor([q for _, q in ROWS], dtype=torch.float32)
    data = logits.numpy().astype("<f4").tobytes()
    (root / "l.f32").write_bytes(data)
    (root / "p.f32").write_bytes(p.numpy().astype("<f4").tobytes())
    index = {"schema": "topp-gate/cases/v1", "cases": [{
        "id": "mixed", "kind": "forced", "batch": len(ROWS), "vocab": VOCAB,
        "logits": "l.f32", "p": "p.f32", "rows": []}]}
    path = root / "cases.json"
    path.write_text(json.dumps(index))
    return path, data


@pytest.fixture()
def pinned(tmp_path: Path):
    tree = tmp_path / "src"
    shutil.copytree(torch_topp.TREE, tree)
    result = pin(str(tree), tmp_path / "torch-topp.pin.json", cache=tmp_path / "cache",
                 family="torch-topp")
    return load_pin_file(result.path), result.tree


def test_the_family_is_registered_from_outside_the_package():
    assert families.get("torch-topp") is torch_topp.FAMILY
    assert families.entry("torch-topp").request() == {
        "id": "torch-topp", "module": "torch_topp", "path": str(torch_topp.TREE.parent)}
    assert families.get() is families.get("vllm-triton")
    with pytest.raises(UsageError, match="unknown kernel family"):
        families.get("no-such-family")


def test_its_pin_file_names_the_family_and_its_kernel(pinned):
    pin_file, _ = pinned
    assert pin_file.data["family"] == "torch-topp"
    assert pin_file.data["kernel_path"] == "torch_topp_kernel/topp.py"
    assert set(pin_file.data["files"]) == {"torch_topp_kernel/__init__.py",
                                           "torch_topp_kernel/topp.py"}
    side = pin_file.side("stock")
    assert side.family == "torch-topp" and side.describe()["family"] == "torch-topp"
    # a pin whose kernel_path is not its family's is refused, in code (not by the schema)
    for change in ({"family": "vllm-triton"}, {"kernel_path": "torch_topp_kernel/__init__.py"}):
        wrong = {**pin_file.data, **change}
        with pytest.raises(SourcesError, match="kernel_path"):
            parse_pin_file(pin_bytes(wrong))


def test_its_dispatch_path_is_proven_by_the_kernel_runner(pinned, tmp_path: Path):
    pin_file, tree = pinned
    side = pin_file.side("stock")
    cases, data = _cases(tmp_path)
    result = run_side(side, tree, "interpreter", 2, cases, tmp_path / "out", timeout_s=300)
    assert result.ok, (result.reason, result.stderr_tail)
    evidence = result.evidence
    assert evidence["family"] == "torch-topp" and evidence["dispatch"] == "sort"
    assert evidence["tree_sha256"] == side.digest
    assert evidence["kernel_sha256"] == side.kernel_sha256
    assert proven_cases(evidence, "sort") == {"mixed": True}
    record = evidence["cases"][0]
    assert record["sort"]["entry_calls"] == 1 and record["status"] == "ok"
    out = rows((tmp_path / "out/mixed.out.f32").read_bytes(), VOCAB)
    inputs = rows(data, VOCAB)
    for (forced, p), got, given in zip(ROWS, out, inputs, strict=True):
        kept = [i for i, v in enumerate(got) if v != float("-inf")]
        # every kept logit comes back bit for bit
        assert all(struct.pack("<f", got[i]) == struct.pack("<f", given[i]) for i in kept)
        if forced is not None:
            assert kept == [forced]
        else:
            answer = reference(given, to_float32(p))
            assert isinstance(answer, Certified) and sorted(answer.kept) == kept
