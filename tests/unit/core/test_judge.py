"""judge.py: bytes in, per-row gate results out; parallel equals serial."""

from __future__ import annotations

import math
import random

import pytest

from harness.core.errors import ShapeError, UsageError
from harness.core.f32 import encode, to_float32
from harness.core.judge import CaseBytes, RowSpec, judge_cases
from harness.core.oracle import reference

NEG = -math.inf


def _case(seed: int, batch: int = 3, vocab: int = 200, damage: bool = False) -> CaseBytes:
    rnd = random.Random(seed)
    logits, ps, outs = [], [], []
    for _ in range(batch):
        row = [to_float32(rnd.gauss(0, 1)) for _ in range(vocab)]
        p = to_float32(rnd.uniform(0.1, 0.95))
        kept = set(reference(row, p).kept)
        logits += row
        ps.append(p)
        outs += [v if i in kept else NEG for i, v in enumerate(row)]
    patched = list(outs)
    if damage:  # drop the top token of row 1 on the patched side
        top = max(range(vocab), key=lambda i: logits[vocab + i])
        patched[vocab + top] = NEG
    return CaseBytes(f"c{seed}", vocab, [RowSpec("ordinary")] * batch, encode(logits),
                     encode(ps), encode(outs), encode(patched), split_path=True)


def test_exact_outputs_pass_and_damage_is_found():
    results = judge_cases([_case(1), _case(2, damage=True)])
    assert [(r["case"], r["row"]) for r in results] == [
        ("c1", 0), ("c1", 1), ("c1", 2), ("c2", 0), ("c2", 1), ("c2", 2)]
    assert [bool(r["stops"]) for r in results] == [False, False, False, False, True, False]
    assert "missing_oracle_token" in results[4]["stops"]


def test_parallel_equals_serial_and_fast_equals_pure():
    cases = [_case(s, damage=s % 2 == 0) for s in range(4)]
    serial = judge_cases(cases)
    assert judge_cases(cases, workers=2) == serial
    assert judge_cases(cases, workers=2, fast=True) == serial


def test_side_failure_status_applies_to_every_row():
    c = _case(3)
    failed = CaseBytes(c.id, c.vocab, c.rows, c.logits, c.p, "timeout", c.patched, True)
    assert all(r["stops"] == ["timeout"] for r in judge_cases([failed]))


def test_truncated_output_is_unreadable_not_a_crash():
    c = _case(4)
    short = CaseBytes(c.id, c.vocab, c.rows, c.logits, c.p, c.stock, c.patched[:-4], True)
    assert all(r["stops"] == ["unreadable_output"] for r in judge_cases([short]))


def test_malformed_cases_are_refused():
    c = _case(5)
    with pytest.raises(ShapeError):
        judge_cases([CaseBytes(c.id, c.vocab, c.rows, c.logits[:-4], c.p, c.stock,
                               c.patched, True)])
    with pytest.raises(ShapeError):
        judge_cases([CaseBytes(c.id, c.vocab, c.rows, c.logits, c.p[:-4], c.stock,
                               c.patched, True)])
    with pytest.raises(UsageError):
        judge_cases([CaseBytes(c.id, c.vocab, [RowSpec("forced")] * 3, c.logits, c.p,
                               c.stock, c.patched, True)])
    with pytest.raises(UsageError):
        judge_cases([CaseBytes(c.id, c.vocab, c.rows, c.logits, c.p, "fine", c.patched,
                               True)])


def _arbitrary_case(data, kind: str) -> CaseBytes:
    from hypothesis import strategies as st

    vocab = data.draw(st.integers(1, 24))
    level = st.sampled_from([-2.0, -0.0, 0.0, 0.5, 1.0, 3.0, 1e30])
    logits = data.draw(st.lists(level, min_size=vocab, max_size=vocab))
    out = st.sampled_from(["keep", "mask", "nan", "inf", "other"])

    def side() -> list[float]:
        pick = data.draw(st.lists(out, min_size=vocab, max_size=vocab))
        table = {"mask": NEG, "nan": math.nan, "inf": math.inf, "other": 7.0}
        return [v if how == "keep" else table[how] for v, how in zip(logits, pick)]

    p = to_float32(data.draw(st.sampled_from([0.1, 0.5, 0.9, 0.999])))
    forced = data.draw(st.integers(0, vocab - 1)) if kind == "forced" else None
    return CaseBytes("h", vocab, [RowSpec(kind, forced)], encode(logits), encode([p]),
                     encode(side()), encode(side()), split_path=data.draw(st.booleans()))


@pytest.mark.parametrize("kind", ["ordinary", "forced"])
def test_fast_judge_equals_pure_judge_on_arbitrary_outputs(kind):
    """Ties, signed zeros, NaN, +inf, holes, wrong values: the numpy path (oracle and gate
    scans) must return exactly the pure path's row results."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.data())
    def check(data):
        case = _arbitrary_case(data, kind)
        assert judge_cases([case], fast=True) == judge_cases([case], fast=False)

    check()
