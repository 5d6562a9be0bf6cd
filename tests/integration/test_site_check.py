"""``topp-gate site EVIDENCE_DIR --out DIR --check`` (what CI runs on the committed evidence):
exit 4, one line per problem, unless every piece verified and the bundle folders are exactly
those ``verdicts.tsv`` names, each with its recorded verdict. The pages are written either
way. Real committed bundles, really verified."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "bundles/smoke-interpreter-20261129"
KEY = "keys/topp-gate-evidence.pub"


def _evidence(base: Path, table: list[str]) -> Path:
    evidence = base / "evidence"
    shutil.copytree(ROOT / "evidence" / SMOKE, evidence / SMOKE)
    (evidence / KEY).parent.mkdir(parents=True)
    shutil.copyfile(ROOT / "evidence" / KEY, evidence / KEY)
    (evidence / "verdicts.tsv").write_text("# path\tkey\tverdict\n" + "".join(
        f"{line}\n" for line in table), "utf-8")
    return evidence


def test_the_record_and_the_evidence_agreeing_is_exit_0(tmp_path, capsys):
    evidence = _evidence(tmp_path, [f"evidence/{SMOKE}\tevidence/{KEY}\tSTOP"])
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check",
                 "--no-mutation", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "site: --check: every piece verified; 1 bundles, each with the verdict" in err
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_disagreement_is_a_line_and_exit_4_with_the_pages_written(tmp_path, capsys):
    evidence = _evidence(tmp_path, [f"evidence/{SMOKE}\tevidence/{KEY}\tPASS",
                                    f"evidence/bundles/gone\tevidence/{KEY}\tSTOP"])
    shutil.copytree(evidence / SMOKE, evidence / "bundles/unrecorded-copy")
    (evidence / "bundles/no-receipt").mkdir()
    tampered = evidence / "bundles/unrecorded-copy/results/rows.json"
    tampered.write_text(tampered.read_text("utf-8").replace('"kept":1,', '"kept":2,', 1))
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check",
                 "--no-mutation", "--workers", "1"]) == 4
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("site: --check: ")]
    assert lines[0] == "site: --check: evidence/bundles/no-receipt: no receipt.dsse.json"
    assert lines[1] == (f"site: --check: evidence/{SMOKE}: verified verdict STOP, "
                        "verdicts.tsv records PASS")
    assert lines[2].startswith("site: --check: evidence/bundles/unrecorded-copy: refused: ")
    assert lines[3] == "site: --check: evidence/bundles/gone: named in verdicts.tsv but not found"
    assert lines[4] == "site: --check: 4 problems against verdicts.tsv"
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize("line", ["evidence/x\tevidence/k.pub\tMAYBE", "evidence/x\tk.pub",
                                  "evidence/x\tk\tSTOP\nevidence/x/\tk\tPASS"])
def test_a_bad_record_is_refused_in_one_line_before_anything_is_verified(tmp_path, capsys,
                                                                          line):
    evidence = _evidence(tmp_path, [line])
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "verdicts.tsv:" in err and "site: verifying" not in err
    assert not (tmp_path / "site").exists()


def test_a_record_that_is_a_fifo_or_a_link_to_one_is_refused_without_blocking(tmp_path, capsys):
    import os

    evidence = _evidence(tmp_path, [])
    (evidence / "verdicts.tsv").unlink()
    os.mkfifo(tmp_path / "fifo")
    (evidence / "verdicts.tsv").symlink_to(tmp_path / "fifo")
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a regular file" in err
