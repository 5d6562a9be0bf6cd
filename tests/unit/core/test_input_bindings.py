"""Captured inputs against the manifest without a generator: the real case builder's bytes
pass, and one changed value of any explicitly fixed kind is refused."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from harness.core.errors import BindingMismatchError
from harness.core.input_bindings import check_case_inputs
from harness.core.manifest import case_layout, load_manifest

torch = pytest.importorskip("torch")
from harness.capture.cases import build_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SMOKE = load_manifest(ROOT / "evidence" / "manifests" / "smoke-interpreter.json")


def _built(case_id: str):
    spec = next(c for c in SMOKE.cases if c["id"] == case_id)
    return spec, case_layout(spec), build_case(spec)


def _poke(data: bytes, index: int, value: float) -> bytes:
    return data[:4 * index] + struct.pack("<f", value) + data[4 * index + 4:]


@pytest.mark.parametrize("spec", SMOKE.cases, ids=lambda c: c["id"])
def test_the_case_builders_bytes_satisfy_every_binding(spec):
    built = build_case(spec)
    check_case_inputs(spec, case_layout(spec), built.logits, built.p)


def test_a_forced_value_other_than_the_manifests_is_refused():
    spec, layout, built = _built("forced-v2048")
    with pytest.raises(BindingMismatchError, match="forced token 1025"):
        check_case_inputs(spec, layout, _poke(built.logits, 1025, 50.0), built.p)


def test_a_forced_case_with_two_backgrounds_is_refused():
    spec, layout, built = _built("forced-v2048")
    second_row = 2048 + 3
    with pytest.raises(BindingMismatchError, match="background"):
        check_case_inputs(spec, layout, _poke(built.logits, second_row, 0.125), built.p)


def test_a_p_other_than_the_manifests_is_refused():
    spec, layout, built = _built("forced-v2048")
    with pytest.raises(BindingMismatchError, match="row 0 p"):
        check_case_inputs(spec, layout, built.logits, _poke(built.p, 0, 0.25))


def test_an_ordinary_p_outside_its_generators_range_is_refused():
    spec, layout, built = _built("ordinary-s42-b4-v1024")
    with pytest.raises(BindingMismatchError, match="row 1 p"):
        check_case_inputs(spec, layout, built.logits, _poke(built.p, 1, 0.05))


def test_ties_and_adjacent_constructions_are_checked_value_by_value():
    spec, layout, built = _built("boundary-ties-v4096")
    with pytest.raises(BindingMismatchError, match="ties construction"):
        check_case_inputs(spec, layout, _poke(built.logits, 5, 0.5), built.p)
    spec, layout, built = _built("boundary-huge-v4096")
    row = built.logits[:4096 * 4]
    top = struct.unpack("<f", struct.pack("<f", 5.0))[0]
    step = struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", top))[0]
                                           - 1))[0]
    index = [struct.unpack("<f", row[i:i + 4])[0] for i in range(0, len(row), 4)].index(step)
    with pytest.raises(BindingMismatchError, match="adjacent construction, step 1"):
        check_case_inputs(spec, layout, _poke(built.logits, index, 0.0), built.p)
