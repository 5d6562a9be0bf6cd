"""The committed GPU `topp-gate pr` evidence of issue 39 verifies offline, as VERIFYING.md says.

Three archives, each the device's own (an NVIDIA H100, 2026-12-05; no H200 could be started):

* `evidence/pr/pr-flashinfer-v1-h100-20261205.tar.xz`: FlashInfer 0.7.2.post1 against a
  harmless change (a comment in `flashinfer/sampling.py`: PASS), and a harmful one-line change
  (`top_k_top_p_sampling_from_logits` takes the softmax of the unmasked logits: top-k is lost
  before top-p sampling) run twice, both sides (`harmful-both`) and reusing the base side the
  harmless run verified (`harmful`): STOP on the same 64 rows, every one a sampling row;
* `evidence/pr/pr-flashinfer-v3-h100-20261205.tar.xz`: the same three runs on the matrix
  `pr` takes now, `pr-flashinfer-v3` (rule set `regression-support/v2`, its draws declared in
  the manifest: 64 per row, seed 20261201, offset 0, checked in each side's evidence). On the
  device each run signed its bundle and then refused it (exit 4): the verifier held a row that
  two outputs read through `indices` to 64 draws, not 128 (fixed in `fa9e280`); here every
  bundle verifies with its verdict, the draws of such rows included;
* `evidence/pr/pr-pytorch-cuda-v1-h100-20261205.tar.xz`: vLLM 0.33.0's PyTorch path, a
  harmless comment (PASS) and the top-p mask's `<=` as `<` (STOP on the five dyadic rows where
  the cumulative sum meets 1 - p exactly).

Each bundle must verify against the `pr.json` frozen beside it, under evidence key 6, by the
rule set its matrix predeclares, with its recorded verdict (exit 0 and 1); a reviewer who
requires another rule set gets a refusal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.mutation.mutate import mutation_folder

ROOT = Path(__file__).resolve().parents[2]
KEY = ROOT / "evidence/keys/topp-gate-evidence-6.pub"
FLASHINFER = ROOT / "evidence/pr/pr-flashinfer-v1-h100-20261205.tar.xz"
FLASHINFER_V3 = ROOT / "evidence/pr/pr-flashinfer-v3-h100-20261205.tar.xz"
PYTORCH = ROOT / "evidence/pr/pr-pytorch-cuda-v1-h100-20261205.tar.xz"
FLASHINFER_PIN = ROOT / "evidence/pins/flashinfer-0.7.2.post1.json"


def _verify(folder: Path, rules: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["verify", str(folder / "bundle"), "--pubkey", str(KEY), "--frozen-manifest",
                 str(folder / "pr.json"), "--require-rules", rules, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _rows(answer: dict) -> set[str]:
    return {row for rows in answer["broken_rows"].values() for row in rows}


def _flashinfer_three_runs(results: Path, rules: str, capsys: pytest.CaptureFixture[str]
                           ) -> tuple[dict, dict]:
    """The script's three runs verified by ``rules``: harmless PASS, harmful STOP with both
    sides run and again (the base reused or run again) on the same broken rows, by the same
    reasons; returns the harmless and the harmful-both answers."""
    code, harmless = _verify(results / "harmless", rules, capsys)
    assert code == 0 and harmless["verified"] is True and not harmless["broken_rows"]
    code, both = _verify(results / "harmful-both", rules, capsys)
    assert code == 1 and both["verified"] is True
    code, again = _verify(results / "harmful", rules, capsys)
    assert code == 1 and again["verified"] is True
    assert again["broken_rows"] == both["broken_rows"]
    assert set(both["broken_rows"]) == {"mass_outside_growth", "new_fault",
                                        "outside_support_growth"}
    assert len(_rows(both)) == 64
    return harmless, both


def test_flashinfer_pr_bundles_verify_with_their_verdicts(capsys: pytest.CaptureFixture[str]):
    with mutation_folder(FLASHINFER) as results:
        harmless, _ = _flashinfer_three_runs(results, "regression-support/v1", capsys)
        assert harmless["sampling"] is None  # v1 declares no draws: the family's constants
        code, refused = _verify(results / "harmless", "regression/v2", capsys)
        assert code == 4 and refused["verified"] is False


def test_flashinfer_v3_pr_bundles_verify_with_their_declared_draws(
        capsys: pytest.CaptureFixture[str]):
    declared = {"draws_per_row": 64, "seed": 20261201, "offset": 0}
    with mutation_folder(FLASHINFER_V3) as results:
        for name in ("harmless", "harmful-both", "harmful"):
            assert json.loads((results / name / "pr.json").read_text())["sampling"] == declared
        harmless, both = _flashinfer_three_runs(results, "regression-support/v2", capsys)
        assert harmless["sampling"] == declared and both["sampling"] == declared
        # the change loses top-k before top-p sampling: the indices case that takes both
        # stops too, every row of it read by two outputs (128 draws, 2 x 64)
        assert {f"indices-topk-topp-bf16-v4096-b4[{i}]" for i in (0, 1, 3)} <= _rows(both)
        code = main(["verify", str(results / "harmless" / "bundle"), "--pubkey", str(KEY),
                     "--frozen-manifest", str(results / "harmless" / "pr.json"),
                     "--require-base", str(FLASHINFER_PIN),
                     "--require-patch", str(results / "harmful" / "change.diff")])
        capsys.readouterr()
        assert code == 4  # the harmless bundle gated another diff than the harmful one


def test_pytorch_path_pr_bundles_verify_with_their_verdicts(capsys: pytest.CaptureFixture[str]):
    with mutation_folder(PYTORCH) as results:
        code, harmless = _verify(results / "pr-harmless", "regression/v2", capsys)
        assert code == 0 and harmless["verified"] is True and not harmless["broken_rows"]
        code, harmful = _verify(results / "pr-harmful", "regression/v2", capsys)
        assert code == 1 and harmful["verified"] is True
        assert _rows(harmful) == {f"boundary-topp-ties-v512[{i}]" for i in range(5)}
