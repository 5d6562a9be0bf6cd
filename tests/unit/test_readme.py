"""The docs name every CLI verb (docs/commands.md) and README.md the exact commands CI runs."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from harness.cli import VERBS, build_parser
from harness.present import sections

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


def test_readme_fits_on_a_page_or_two():
    # issue 29: everything else lives in docs/ (the docs index links each file)
    assert len(README.splitlines()) < 250


def test_readme_sections_come_in_the_order_a_reader_needs_them():
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[:5] == ["Two commands", "Findings", "Gate your pull request",
                            "Verify a bundle", "More"]
    assert not README.split("\n## ")[0].count("Is a change to")  # not the old single question
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name}" in README, f"the docs index misses docs/{doc.name}"


def test_readme_holds_no_generated_section():
    # the generated tables moved to docs/ (sections.HOMES), where CI checks them
    for section in sections.SECTIONS.values():
        assert not sections.holds(section, README), section.name
        assert sections.HOMES[section.name].startswith("docs/")


def test_every_readme_command_is_one_the_tools_accept():
    """Each topp-gate line in README's code blocks parses with the real CLI parser, and each
    script it names exists and is executable (what they do is tested where they run:
    tests/unit/test_scripts_gate.py, tests/integration/test_pr_cli.py, CI runs scripts/test;
    the `sh` block runs pasted into a fresh shell: tests/integration/test_readme_commands.py)."""
    parser = build_parser()
    blocks = re.findall(r"^```(?:bash|sh)\n(.*?)^```", README, re.S | re.M)
    seen = set()
    for line in "\n".join(blocks).splitlines():
        command = line.split("  #")[0].split("# ")[0].strip()
        if command.startswith("topp-gate "):
            words = shlex.split(command)[1:]
            parser.parse_args(words)  # argparse exits 2 on a command it does not accept
            seen.add(words[0])
        elif command.startswith("scripts/"):
            script = ROOT / command.split()[0]
            assert script.is_file() and os.access(script, os.X_OK), command
            seen.add(command.split()[0])
    assert {"pr", "verify", "scripts/gate", "scripts/test"} <= seen
