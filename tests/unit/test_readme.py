"""The docs name every CLI verb (docs/commands.md) and README.md the exact commands CI runs."""

from __future__ import annotations

from pathlib import Path

from harness.cli import VERBS, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
COMMANDS = (ROOT / "docs" / "commands.md").read_text("utf-8")


def test_every_verb_is_documented_and_registered():
    parser = build_parser()
    registered = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001
    assert registered == set(VERBS)
    for verb in VERBS:
        assert f"topp-gate {verb}" in COMMANDS, verb


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci/run").read_text("utf-8")
    assert "exec scripts/test" in ci
    assert "scripts/test" in README and "scripts/gate" in README
