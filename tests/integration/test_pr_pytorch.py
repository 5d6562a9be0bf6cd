"""``topp-gate pr`` on vLLM's PyTorch path (family ``vllm-pytorch``, issue 39), on the CPU.

Without --matrix, ``pr`` picks the family's newest PR matrix of the backend
(``pr-pytorch-v2`` on the CPU, the interpreter backend label: the path is plain torch and
runs for real there; ``pr-pytorch-cuda-v1`` on CUDA). A harmful
diff of the pinned ``topk_topp_sampler.py`` (the top-p mask's ``<=`` flipped to ``<``, the
catalogue's ``pt-cmp-topp-lt``) STOPs and names the dyadic rows it broke; a harmless diff (a
comment) PASSes on the second run, which reuses the first run's verified base side. A
backend without a matrix of a family is refused by name before anything runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import UsageError
from harness.pins.pinfile import load_pin_file
from harness.pins.sources import cache_root, kernel_diff, resolve_tree
from harness.pr.flow import NEWEST_PR_MATRICES, newest_pr_matrix

ROOT = Path(__file__).resolve().parents[2]
PIN = ROOT / "evidence/pins/vllm-pytorch-0.33.0.json"
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"
TOPP = "        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)\n"

pytestmark = [pytest.mark.sources]


def _sampler() -> bytes:
    side = load_pin_file(PIN).side("stock")
    return (resolve_tree(side, cache=cache_root()) / side.kernel_path).read_bytes()


def _diff(tmp_path: Path, name: str, old: str, new: str) -> Path:
    sampler = _sampler()
    assert sampler.count(old.encode()) == 1
    path = tmp_path / name
    path.write_bytes(kernel_diff(sampler, sampler.replace(old.encode(), new.encode()),
                                 load_pin_file(PIN).data["kernel_path"]))
    return path


def _pr(tmp_path: Path, key: Path, out: Path, patch: Path, *more: str) -> int:
    return main(["pr", str(PIN), "--patch", str(patch), *more, "--key", str(key),
                 "--out", str(out), "--base-cache", str(tmp_path / "bases"), "--workers", "1"])


def test_the_newest_pr_matrix_is_per_family_and_backend():
    assert NEWEST_PR_MATRICES["vllm-pytorch"] == {"interpreter": "pr-pytorch-v2",
                                                  "cuda": "pr-pytorch-cuda-v1"}
    assert newest_pr_matrix("vllm-pytorch", "interpreter", "interpreter") == \
        ("interpreter", "pr-pytorch-v2")
    assert newest_pr_matrix("vllm-pytorch", "cuda", "auto") == ("cuda", "pr-pytorch-cuda-v1")
    assert newest_pr_matrix("vllm-triton", "cuda", "auto") == ("cuda", "pr-cuda-v4")
    assert newest_pr_matrix("vllm-triton", "interpreter", "auto") == \
        ("interpreter", "pr-interpreter-v4-small")


def test_a_family_with_one_backend_takes_it_on_auto_and_refuses_another_by_name(monkeypatch):
    # a family whose PR matrices hold one backend (as the PyTorch path's did before its CUDA
    # matrix): auto takes that backend, a named other backend is refused naming it
    monkeypatch.setitem(NEWEST_PR_MATRICES, "vllm-pytorch", {"interpreter": "pr-pytorch-v2"})
    assert newest_pr_matrix("vllm-pytorch", "cuda", "auto") == ("interpreter", "pr-pytorch-v2")
    with pytest.raises(UsageError, match=r"no cuda PR matrix .* vllm-pytorch.*pr-pytorch-v2"):
        newest_pr_matrix("vllm-pytorch", "cuda", "cuda")  # --backend cuda named


@pytest.mark.slow
def test_a_harmful_diff_stops_and_a_harmless_one_passes_reusing_the_base(
        tmp_path, signing_key, capsys):
    harmful = _diff(tmp_path, "topp-lt.diff", TOPP, TOPP.replace("<=", "<"))
    first = tmp_path / "first"
    assert _pr(tmp_path, signing_key, first, harmful) == 1
    out, _ = capsys.readouterr()
    assert "(matrix pr-pytorch-v2, rules regression/v2)" in out.splitlines()[0]
    predicate = json.loads((first / "bundle" / "receipt.json").read_bytes())["predicate"]
    stopped = {f"{r['case']}[{r['row']}]" for r in predicate["rows"] if r["stops"]}
    assert out.startswith(f"STOP: the change broke {len(stopped)} of {len(predicate['rows'])}")
    assert "boundary-topp-ties-v512[0]" in stopped  # the dyadic row: cumsum == 1 - p
    assert "  boundary-topp-ties-v512[0]  " in out and "  sort  kept: oracle 1, base 1, " \
        "change 2\n" in out
    assert "base: ran; its verified side is kept" in out
    assert main(["verify", str(first / "bundle"), "--pubkey", str(PUB),
                 "--frozen-manifest", str(first / "pr.json")]) == 1  # verified STOP
    capsys.readouterr()

    harmless = _diff(tmp_path, "comment.diff", "        # at least one\n",
                     "        # keep at least one token\n")
    second = tmp_path / "second"
    assert _pr(tmp_path, signing_key, second, harmless) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("PASS: the change broke none of")
    assert "outputs: 0 of " in out
    assert f"base: reused the verified base side of {first / 'bundle'}" in out
    manifest = json.loads((second / "pr.json").read_bytes())
    assert {s["family"] for s in manifest["sources"]["sides"].values()} == {"vllm-pytorch"}
