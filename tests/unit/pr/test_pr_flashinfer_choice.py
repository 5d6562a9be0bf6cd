"""``pr`` picks pr-flashinfer-v3 for a FlashInfer change on CUDA (issue 39), a release or a
patch of 0.7.2.post1 and an upgrade between FlashInfer releases alike, and refuses FlashInfer
on the CPU in one line naming that matrix (FlashInfer has no CPU path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.capture.manifest_new import load_matrix
from harness.core.errors import UsageError
from harness.pr.flow import NEWEST_PR_MATRICES, check_family, matrix_rules, newest_pr_matrix

PINS = Path(__file__).resolve().parents[3] / "evidence" / "pins"


def test_flashinfer_gets_its_cuda_matrix():
    assert NEWEST_PR_MATRICES["flashinfer"] == {"cuda": "pr-flashinfer-v3"}
    for requested in ("cuda", "auto"):
        assert newest_pr_matrix("flashinfer", "cuda", requested) == ("cuda", "pr-flashinfer-v3")
    assert matrix_rules("pr-flashinfer-v3", "cuda", "flashinfer") is None  # predeclared
    # its draws are declared (the parent passes them to the child; verify checks them)
    assert load_matrix("pr-flashinfer-v3")["sampling"] == {"draws_per_row": 64,
                                                           "seed": 20261201, "offset": 0}


@pytest.mark.parametrize("base, change", [
    ("flashinfer-0.7.2.post1.json", None),
    ("flashinfer-0.6.0.json", "flashinfer-0.6.1.json"),  # an upgrade between releases
    ("flashinfer-0.6.1.json", "flashinfer-0.7.2.post1.json"),
])
def test_a_change_between_flashinfer_releases_takes_the_same_matrix(base, change):
    family = check_family(PINS / base, PINS / change if change else None, None)
    assert family == "flashinfer"
    assert newest_pr_matrix(family, "cuda", "auto") == ("cuda", "pr-flashinfer-v3")


@pytest.mark.parametrize("requested, why", [
    ("interpreter", "--backend interpreter was given"),
    ("auto", "torch sees no CUDA device on this machine"),
])
def test_flashinfer_on_the_cpu_is_refused_naming_the_cuda_matrix(requested, why):
    with pytest.raises(UsageError) as err:
        newest_pr_matrix("flashinfer", "interpreter", requested)
    text = str(err.value)
    assert "\n" not in text and why in text
    assert "family flashinfer runs on CUDA only" in text and "pr-flashinfer-v3" in text


def test_the_other_families_choices_are_unchanged():
    assert newest_pr_matrix("vllm-triton", "cuda", "auto") == ("cuda", "pr-cuda-v4")
    assert newest_pr_matrix("vllm-triton", "interpreter", "auto") == \
        ("interpreter", "pr-interpreter-v4-small")
    assert newest_pr_matrix("vllm-pytorch", "interpreter", "auto") == \
        ("interpreter", "pr-pytorch-v2")
