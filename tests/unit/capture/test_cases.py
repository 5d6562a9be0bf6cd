"""harness.capture.cases: determinism, upstream-style draws, and each boundary construction."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture import cases as cs
from harness.core import manifest as mf
from harness.core.cases_index import check_against_manifest, parse_cases_index
from harness.core.errors import LimitError, NonFiniteLogitError, UsageError
from harness.core.f32 import decode, runtime_p, to_float32
from harness.core.oracle import Certified, canonical_order, reference

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "evidence" / "manifests"
H200 = MANIFESTS / "h200-forced-logit-gate.json"
SMOKE = MANIFESTS / "smoke-interpreter.json"


@pytest.fixture(scope="module")
def h200() -> mf.Manifest:
    return mf.parse_manifest(H200.read_bytes())


@pytest.fixture(scope="module")
def smoke() -> mf.Manifest:
    return mf.parse_manifest(SMOKE.read_bytes())


@pytest.fixture(scope="module")
def h200_built(h200: mf.Manifest) -> dict[str, cs.BuiltCase]:
    return {b.layout.id: b for b in cs.build_cases(h200)}


def _case(manifest: mf.Manifest, cid: str) -> dict:
    return next(c for c in manifest.cases if c["id"] == cid)


def _rows(built: cs.BuiltCase) -> np.ndarray:
    return np.frombuffer(built.logits, "<f4").reshape(built.layout.batch, built.layout.vocab)


def _ps(built: cs.BuiltCase) -> list[float]:
    return decode(built.p)


def _digest(built: list[cs.BuiltCase]) -> str:
    h = hashlib.sha256()
    for b in built:
        h.update(hashlib.sha256(b.logits).digest() + hashlib.sha256(b.p).digest())
    return h.hexdigest()


# --- determinism and layout --------------------------------------------------------------------


def test_same_manifest_same_bytes(h200: mf.Manifest, h200_built) -> None:
    again = cs.build_cases(h200)
    assert _digest(again) == _digest(list(h200_built.values()))


def test_same_bytes_in_a_fresh_process(smoke: mf.Manifest) -> None:
    code = (
        "import hashlib, sys\n"
        "from harness.capture import cases\nfrom harness.core import manifest\n"
        f"m = manifest.parse_manifest(open({str(SMOKE)!r}, 'rb').read())\n"
        "h = hashlib.sha256()\n"
        "for b in cases.build_cases(m):\n"
        "    h.update(hashlib.sha256(b.logits).digest() + hashlib.sha256(b.p).digest())\n"
        "print(h.hexdigest())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == _digest(cs.build_cases(smoke))


def test_write_cases_is_byte_identical_and_matches_layout(smoke: mf.Manifest,
                                                          tmp_path: Path) -> None:
    first = cs.write_cases(smoke, tmp_path / "a")
    second = cs.write_cases(smoke, tmp_path / "b")
    assert first == second
    for rel, digest in first.items():
        data = (tmp_path / "a" / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest
    layout = parse_cases_index((tmp_path / "a" / "cases.json").read_bytes())
    check_against_manifest(layout, smoke)
    for case in layout:
        assert (tmp_path / "a" / case.logits_path).stat().st_size == case.logits_bytes
        assert (tmp_path / "a" / case.p_path).stat().st_size == case.p_bytes
    with pytest.raises(UsageError, match="refusing to overwrite"):
        cs.write_cases(smoke, tmp_path / "a")


def test_bytes_are_little_endian_float32_row_major() -> None:
    case = {"id": "o", "kind": "ordinary", "seed": 3, "batch": 2, "vocab": 5}
    built = cs.build_case(case)
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, generator=g)
    assert built.logits == b"".join(
        np.array(row, dtype="<f4").tobytes() for row in logits.tolist())
    assert decode(built.logits) == logits.flatten().tolist()


# --- ordinary rows: upstream tests' style -----------------------------------------------------


def test_ordinary_rows_are_the_upstream_draws(h200: mf.Manifest, h200_built) -> None:
    case = _case(h200, "ordinary-s42-b8-v1024")
    g = torch.Generator().manual_seed(42)
    logits = torch.randn(8, 1024, generator=g)
    p = torch.rand(8, generator=g) * 0.9 + 0.1
    built = h200_built["ordinary-s42-b8-v1024"]
    assert np.array_equal(_rows(built), logits.numpy())
    assert _ps(built) == p.tolist()
    assert case["seed"] == 42
    assert all(0.1 <= v < 1.0 for v in _ps(built))


# --- forced rows -------------------------------------------------------------------------------


def test_forced_rows_are_background_plus_one_token(h200: mf.Manifest, h200_built) -> None:
    case = _case(h200, "forced-v32000")
    built = h200_built["forced-v32000"]
    background = torch.randn(32000, generator=torch.Generator().manual_seed(0)).numpy()
    rows = _rows(built)
    for i, (value, p, token) in enumerate(mf.forced_grid(case)):
        assert built.layout.rows[i].forced_id == token
        assert float(rows[i, token]) == to_float32(float(value))
        others = np.delete(rows[i], token)
        assert np.array_equal(others, np.delete(background, token))
        assert _ps(built)[i] == runtime_p(p)
    assert float(rows[-1, 31999]) == float(np.finfo(np.float32).max)


# --- boundary constructions do what they say ----------------------------------------------------


def test_exact_ties_tie_and_straddle_the_boundary(h200: mf.Manifest, h200_built) -> None:
    built = h200_built["boundary-ties-v128256"]
    rows = _rows(built)
    perm = torch.randperm(128256, generator=torch.Generator().manual_seed(5)).numpy()
    for r, ones, zeros in ((0, np.arange(1000), np.arange(1000, 2000)),
                           (1, perm[:1000], perm[1000:2000])):
        row = rows[r]
        assert np.array_equal(np.sort(np.flatnonzero(row == 1.0)), np.sort(ones))
        assert np.array_equal(np.sort(np.flatnonzero(row == 0.0)), np.sort(zeros))
        assert np.count_nonzero(row == -20.0) == 128256 - 2000
        outcome = reference(row.tolist(), _ps(built)[r])
        assert isinstance(outcome, Certified)
        # the boundary falls strictly inside the tied group at 1.0: canonicalization matters
        assert 1 < outcome.count < 1000
        assert list(outcome.kept) == sorted(ones.tolist())[: outcome.count]
    assert not np.array_equal(rows[0], rows[1])


def test_adjacent_values_are_consecutive_float32(h200: mf.Manifest, h200_built) -> None:
    built = h200_built["boundary-adjacent-v32000"]
    rows = _rows(built)
    positions = torch.randperm(32000, generator=torch.Generator().manual_seed(7))[:64].numpy()
    background = torch.randn(32000, generator=torch.Generator().manual_seed(7)).numpy()
    for r in range(3):
        row = rows[r]
        values = row[positions]
        expected = np.float32(5.0)
        for value in values:  # position k holds the float32 k + 1 steps below 5.0
            expected = np.nextafter(expected, np.float32(-np.inf), dtype=np.float32)
            assert value == expected
        assert np.array_equal(np.delete(row, positions), np.delete(background, positions))
        top64 = canonical_order(row.tolist())[:64]
        assert sorted(top64) == sorted(positions.tolist())  # they are the row's 64 largest
    low = reference(rows[0].tolist(), _ps(built)[0])
    assert isinstance(low, Certified) and 1 < low.count < 64  # p=0.1 ends among them


def test_huge_finite_logits(h200: mf.Manifest, h200_built) -> None:
    built = h200_built["boundary-huge-v128256"]
    rows = _rows(built)
    background = torch.randn(128256, generator=torch.Generator().manual_seed(8))
    for r, offset in enumerate(("1e4", "1e6", "-1e6")):
        expected = (background + torch.tensor(to_float32(float(offset)))).numpy()
        assert np.array_equal(rows[r], expected)
        # float32 addition really rounds: spot-check against exact binary64 then float32
        for t in (0, 777, 128255):
            assert float(rows[r, t]) == to_float32(float(background[t]) + float(offset))
    assert len(np.unique(rows[1])) < 128256 // 2  # at 1e6 the float32 grid forces many ties
    big = to_float32(1e30)
    assert float(rows[3, 1000]) == big and float(rows[3, 64129]) == big
    assert float(rows[4, 1000]) == big
    below = np.nextafter(np.float32(big), np.float32(-np.inf), dtype=np.float32)
    assert rows[4, 64129] == below and float(below) < big
    assert np.isfinite(rows).all()
    two = reference(rows[3].tolist(), _ps(built)[3])
    assert isinstance(two, Certified) and two.kept == (1000,)  # tie broken by id


def _float32_only_rows(manifest: mf.Manifest):
    for case in manifest.cases:
        if case["kind"] != "boundary":
            continue
        for index, row in enumerate(case["rows"]):
            if row["label"].startswith("p only after float32"):
                yield case, index, row


@pytest.mark.parametrize("path", [H200, SMOKE], ids=lambda p: p.stem)
def test_p_only_after_float32_rows_give_different_oracle_counts(path: Path) -> None:
    manifest = mf.parse_manifest(path.read_bytes())
    found = list(_float32_only_rows(manifest))
    assert len(found) >= 2
    for case, index, row in found:
        built = cs.build_case(case)
        values = cs.row_values(built, index)
        p_text = row["p"]
        p32 = runtime_p(p_text)
        assert _ps(built)[index] == p32 and p32 != float(p_text)
        outcome = reference(values, p32)  # the oracle itself, with float32(p)
        assert isinstance(outcome, Certified)
        count32, count64 = cs.decimal_and_float32_counts(values, p_text)
        assert count32 == outcome.count
        assert count64 != count32, (case["id"], index)
        # independent of bisection: direct fsum prefixes against the decimal's target
        target64 = float(p_text) * outcome.normalizer
        assert math.fsum(outcome.weights[:count64]) >= target64
        assert math.fsum(outcome.weights[: count64 - 1]) < target64


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 3000), near=st.sampled_from(["0.3", "0.5", "0.7", "0.9", "0.95"]))
def test_search_finds_float32_only_p_for_equal_logits(n: int, near: str) -> None:
    row = [0.0] * n
    try:
        p_text = cs.find_float32_only_p(row, near)
    except UsageError:
        return  # none within the searched digits: nothing to check
    count32, count64 = cs.decimal_and_float32_counts(row, p_text)
    assert count32 != count64
    outcome = reference(row, runtime_p(p_text))
    assert isinstance(outcome, Certified) and outcome.count == count32


def test_edge_p_bytes_are_exact(h200_built) -> None:
    ps = _ps(h200_built["boundary-edge-p-v32000"])
    assert ps == [to_float32(1e-7), 2.0**-149, 1.0 - 2.0**-24]


# --- refusals before anything runs ------------------------------------------------------------


def test_non_finite_built_logit_refused() -> None:
    logits = torch.zeros(2, 4)
    logits[1, 2] = float("inf")
    with pytest.raises(NonFiniteLogitError, match="row 1 token 2"):
        cs._check_finite(logits)


def test_over_limit_manifest_never_reaches_the_builder(smoke: mf.Manifest) -> None:
    data = json.loads(SMOKE.read_bytes())
    data["cases"][2]["batch"] = 65
    with pytest.raises(LimitError, match="batch 65"):  # schema-valid, over the hard limit
        mf.parse_manifest(json.dumps(data).encode())


def test_ties_permuted_uses_randperm_positions() -> None:
    spec = {"type": "ties", "groups": [{"count": 3, "logit": "2"}, {"count": 2, "logit": "1"}],
            "rest": "-1", "placement": "permuted", "seed": 11}
    row = cs.construct_row(10, spec)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(11))
    assert row[perm[:3]].tolist() == [2.0] * 3
    assert row[perm[3:5]].tolist() == [1.0] * 2
    assert sorted(row[perm[5:]].tolist()) == [-1.0] * 5
