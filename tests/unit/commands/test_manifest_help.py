"""``manifest new --help`` names every predeclared matrix with the rule set it freezes
(issue 29: it listed no pr-* matrix and said the rule set defaults to seed/v2, while a
pull-request matrix freezes a regression rule set)."""

from __future__ import annotations

import json
from pathlib import Path

import harness
from harness.cli import main

MATRICES = Path(harness.__file__).parent / "data" / "matrices"


def _help(capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "10000")  # one line per paragraph: no wrap inside a name
    assert main(["manifest", "new", "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_help_lists_every_predeclared_matrix_with_its_rule_set(capsys, monkeypatch):
    text = _help(capsys, monkeypatch)
    names = sorted(p.stem for p in MATRICES.glob("*.json"))
    assert any(n.startswith("pr-") for n in names)
    for name in names:
        matrix = json.loads((MATRICES / f"{name}.json").read_text("utf-8"))
        traffic = any(c.get("kind") == "traffic" for c in matrix["cases"])
        rules = matrix.get("rules") or ("serve/v1" if traffic else "seed/v2")
        assert f"{name} ({rules})" in text, name


def test_help_names_the_pr_matrices_regression_rule_sets(capsys, monkeypatch):
    text = _help(capsys, monkeypatch)
    assert "pr-cuda (regression/v1)" in text
    assert "pr-cuda-v4 (regression/v2)" in text
    assert "The rule set is the one the matrix predeclares" in text
