"""The committed H200 `topp-gate pr` evidence (issue 26) verifies offline, as VERIFYING.md says.

`evidence/pr/pr-cuda-v4-h200-20261203.tar.xz` is the device's own archive of two `pr` runs on
vLLM 0.33.0 with the frozen `pr-cuda-v4` matrix: a harmless change (PASS) and a harmful one
(STOP, reusing the base side). Each bundle must verify against the `pr.json` frozen beside it,
under key 5, judged by `regression/v2`, with its recorded verdict (exit 0 and 1) and the rows
the harmful change broke named in `--json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.mutation.mutate import mutation_folder

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "evidence/pr/pr-cuda-v4-h200-20261203.tar.xz"
KEY = ROOT / "evidence/keys/topp-gate-evidence-5.pub"


def _verify(folder: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code = main(["verify", str(folder / "bundle"), "--pubkey", str(KEY), "--frozen-manifest",
                 str(folder / "pr.json"), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_the_h200_pr_bundles_verify_with_their_verdicts(capsys: pytest.CaptureFixture[str]):
    with mutation_folder(ARCHIVE) as results:
        code, harmless = _verify(results / "pr-harmless", capsys, "--require-rules",
                                 "regression/v2")
        assert code == 0 and harmless["verified"] is True
        code, harmful = _verify(results / "pr-harmful", capsys, "--require-rules",
                                "regression/v2")
        assert code == 1 and harmful["verified"] is True
        broken = harmful["broken_rows"]
        assert set(broken) == {"mass_outside_growth", "symdiff_growth"}
        assert len(broken["symdiff_growth"]) == 7
        # a reviewer who requires another rule set gets a refusal, not a verdict
        code, refused = _verify(results / "pr-harmless", capsys, "--require-rules",
                                "regression/v1")
        assert code == 4 and refused["verified"] is False
