"""Which rows a mutant answered differently from the base (harness.mutation.mutant_outputs),
on real signed bundles: the committed interpreter mutation run of pr-interpreter-v2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.keys import load_public_key
from harness.core.verify import open_bundle
from harness.mutation.mutant_outputs import changed_rows
from harness.mutation.mutate import mutation_folder

ROOT = Path(__file__).resolve().parents[3]
ARCHIVE = ROOT / "evidence/mutation/pr-interpreter-v2-cpu-20261203.tar.xz"
KEY = load_public_key(ROOT / "evidence/keys/topp-gate-evidence-4.pub")


@pytest.fixture(scope="module")
def run():
    with mutation_folder(ARCHIVE) as folder:
        summary = json.loads((folder / "mutation.json").read_bytes())
        views = {e["id"]: open_bundle(folder / e["bundle"], KEY)
                 for e in [summary["base"], *summary["mutants"]] if e.get("bundle")}
        yield summary, views


def test_the_base_against_itself_changed_nothing(run):
    _, views = run
    assert changed_rows(views["base"], views["base"]) == []


def test_every_row_a_killed_mutant_stopped_is_a_row_its_output_changed(run):
    # regression/v1 stops a row only where the change does worse than the base there, which
    # needs a different output on that row
    summary, views = run
    killed = [m for m in summary["mutants"] if m["killed"]]
    assert killed
    for mutant in killed:
        changed = changed_rows(views["base"], views[mutant["id"]])
        assert changed, mutant["id"]
        assert {r["row"] for r in mutant["stopped_rows"]} <= set(changed), mutant["id"]


def test_rows_are_compared_byte_for_byte_within_a_case(run):
    summary, views = run
    mutant = next(m for m in summary["mutants"] if m["killed"])
    base, other = views["base"], views[mutant["id"]]
    cases = json.loads(base.raw("cases.json"))["cases"]
    for name in changed_rows(base, other) or []:
        cid, row = name[:-1].split("[")
        case = next(c for c in cases if c["id"] == cid)
        width = 4 * int(case["vocab"])
        out = f"outputs/patched/{cid}.out.f32"
        start = int(row) * width
        assert base.raw(out)[start:start + width] != other.raw(out)[start:start + width]


def test_bundles_of_different_captured_inputs_are_not_compared(run):
    _, views = run
    other = ROOT / "evidence/mutation/pr-cuda-h200-20261201/bundles/base"
    key_3 = load_public_key(ROOT / "evidence/keys/topp-gate-evidence-3.pub")  # signed it
    assert changed_rows(views["base"], open_bundle(other, key_3)) is None


class _OtherInputs:
    """A real verified view whose first case's logits digest reads differently: the same
    case ids and outputs, other captured inputs."""

    def __init__(self, view):
        self._view = view
        self._logits = json.loads(view.raw("cases.json"))["cases"][0]["logits"]

    def raw(self, name):
        return self._view.raw(name)

    def digest(self, name):
        return "0" * 64 if name == self._logits else self._view.digest(name)


def test_the_same_cases_on_other_captured_inputs_are_not_compared(run):
    _, views = run
    assert changed_rows(views["base"], views["base"]) == []
    assert changed_rows(views["base"], _OtherInputs(views["base"])) is None
