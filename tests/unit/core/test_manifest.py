"""harness.core.manifest: schema, frozen hash, limits, exact values, torch-free layout."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core import manifest as mf
from harness.core.digest import sha256_hex, sha256sum_line
from harness.core.errors import (
    EvidenceDriftError,
    HarnessError,
    InvalidPError,
    LimitError,
    ManifestError,
    ManifestNotFrozenError,
)
from harness.core.f32 import to_float32

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "evidence" / "manifests"
H200 = MANIFESTS / "h200-forced-logit-gate.json"
SMOKE = MANIFESTS / "smoke-interpreter.json"
BOTH = [H200, SMOKE]


def _data(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def _raw(data: dict) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def _parse(data: dict) -> mf.Manifest:
    return mf.parse_manifest(_raw(data))


def _freeze(path: Path) -> None:
    path.with_name(path.name + ".sha256").write_text(sha256sum_line(path.read_bytes(),
                                                                        path.name))


# --- schema --------------------------------------------------------------------------------


def test_schema_is_valid_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(mf.manifest_schema())


@pytest.mark.parametrize("name", ["manifest.schema.json", "cases.schema.json"])
def test_top_level_schema_copy_is_byte_identical(name: str) -> None:
    packaged = (ROOT / "harness" / "core" / "schemas" / name).read_bytes()
    assert (ROOT / "schemas" / name).read_bytes() == packaged


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_committed_manifests_validate(path: Path) -> None:
    data = _data(path)
    jsonschema.validate(data, mf.manifest_schema(),
                        cls=jsonschema.Draft202012Validator)
    manifest = mf.parse_manifest(path.read_bytes(), source=path.name)
    assert manifest.name == path.stem
    assert manifest.sha256 == sha256_hex(path.read_bytes())


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_manifest_sources_are_the_pins(path: Path) -> None:
    pins = json.loads((ROOT / "harness" / "data" / "pins.json").read_text())
    sources = _data(path)["sources"]
    for side in ("stock", "patched"):
        for key in ("version", "wheel", "wheel_sha256", "kernel_sha256"):
            assert sources["sides"][side][key] == pins["sides"][side][key], (side, key)
    assert sources.get("patch_sha256") == pins.get("patch_sha256"), (
        "copy patch_sha256 from harness/data/pins.json into the manifest before freezing"
    )


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(schema="topp-gate/manifest/v2"),
        lambda d: d["limits"].update(max_batch=65),
        lambda d: d["backend"].update(required="rocm"),
        lambda d: d["backend"].update(split_path_required=False),
        lambda d: d["cases"][0].update(id="Upper"),
        lambda d: d["cases"][0].update(extra=1),
        lambda d: d["cases"][0]["grid"].update(p=[0.5]),
        lambda d: d["sources"]["sides"]["stock"].update(wheel_sha256="00"),
        lambda d: d.pop("limits"),
    ],
    ids=["schema", "max_batch", "backend", "split", "id", "extra", "p_number", "sha", "limits"],
)
def test_schema_violations_are_refused(mutate) -> None:
    data = _data(SMOKE)
    mutate(data)
    with pytest.raises(ManifestError, match="schema violation|JSON number"):
        _parse(data)


def test_json_float_refused_even_where_schema_would_see_it() -> None:
    raw = SMOKE.read_bytes().replace(b'"max_batch": 4', b'"max_batch": 4.0')
    with pytest.raises(ManifestError, match="JSON number 4.0"):
        mf.parse_manifest(raw)


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"{", b"[]", b"NaN"])
def test_garbage_is_one_typed_error(raw: bytes) -> None:
    with pytest.raises(ManifestError) as info:
        mf.parse_manifest(raw)
    assert "\n" not in str(info.value)


# --- frozen hash ---------------------------------------------------------------------------


def test_frozen_manifest_loads(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(SMOKE.read_bytes())
    _freeze(path)
    assert mf.load_manifest(path).sha256 == sha256_hex(SMOKE.read_bytes())


def test_binary_mode_sha256sum_line_accepted(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(SMOKE.read_bytes())
    path.with_name("m.json.sha256").write_text(f"{sha256_hex(path.read_bytes())} *m.json\n")
    mf.load_manifest(path)


def test_unfrozen_manifest_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(SMOKE.read_bytes())
    with pytest.raises(ManifestNotFrozenError, match="no frozen hash file"):
        mf.load_manifest(path)
    assert mf.load_manifest(path, require_frozen=False).name == "smoke-interpreter"


def test_edited_frozen_manifest_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(SMOKE.read_bytes())
    _freeze(path)
    path.write_bytes(SMOKE.read_bytes().replace(b'"0.5"', b'"0.6"', 1))
    with pytest.raises(EvidenceDriftError) as info:
        mf.load_manifest(path)
    assert info.value.code == "evidence_drift" and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "line",
    ["", "garbage\n", "{h}  other.json\n", "{h}  m.json\n{h}  m.json\n", "{H}  m.json\n"],
    ids=["empty", "garbage", "other-name", "two-lines", "uppercase"],
)
def test_bad_hash_file_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(SMOKE.read_bytes())
    digest = sha256_hex(path.read_bytes())
    path.with_name("m.json.sha256").write_text(line.format(h=digest, H=digest.upper()))
    with pytest.raises(ManifestNotFrozenError):
        mf.load_manifest(path)


def test_missing_manifest_is_typed(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="unreadable"):
        mf.load_manifest(tmp_path / "absent.json")


# --- limits and semantic checks --------------------------------------------------------------


def _smoke_with(case: dict) -> dict:
    data = _data(SMOKE)
    data["cases"].append(case)
    return data


def test_batch_over_manifest_limit_refused() -> None:
    data = _smoke_with({"id": "big", "kind": "ordinary", "seed": 1, "batch": 12, "vocab": 8})
    data["limits"]["max_batch"] = 11
    with pytest.raises(LimitError, match="case big: batch 12 is over the limit 11"):
        _parse(data)


def test_batch_over_64_refused_even_by_forced_grid() -> None:
    grid = {"value": ["1e30"] * 5, "p": ["0.5"] * 13, "forced_id": [0]}  # 65 rows
    data = _smoke_with({"id": "big", "kind": "forced", "vocab": 8, "background_seed": 0,
                        "grid": grid})
    with pytest.raises(LimitError, match="batch 65"):
        _parse(data)


def test_vocab_over_limit_refused() -> None:
    data = _smoke_with({"id": "wide", "kind": "ordinary", "seed": 1, "batch": 1,
                        "vocab": 32001})
    with pytest.raises(LimitError, match="vocab 32001 is over the limit 32000") as info:
        _parse(data)
    assert info.value.code == "over_limit"


@pytest.mark.parametrize(
    ("case", "error", "match"),
    [
        ({"id": "f", "kind": "forced", "vocab": 8, "background_seed": 0,
          "grid": {"value": ["1e39"], "p": ["0.5"], "forced_id": [0]}},
         ManifestError, "not finite"),
        ({"id": "f", "kind": "forced", "vocab": 8, "background_seed": 0,
          "grid": {"value": ["1"], "p": ["0.5"], "forced_id": [8]}},
         ManifestError, "outside vocab"),
        ({"id": "f", "kind": "forced", "vocab": 8, "background_seed": 0,
          "grid": {"value": ["1"], "p": ["1.0"], "forced_id": [0]}},
         InvalidPError, "p="),
        ({"id": "f", "kind": "forced", "vocab": 8, "background_seed": 0,
          "grid": {"value": ["1"], "p": ["0.99999998"], "forced_id": [0]}},
         InvalidPError, "1.0 after float32"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {"type": "randn", "seed": 1,
                                                         "set": [{"id": 1, "value": "1e39"}]}}]},
         ManifestError, "not finite"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {
                "type": "randn", "seed": 1,
                "set": [{"id": 1, "value": "3.4028234663852886e38", "ulps": 1}]}}]},
         ManifestError, "not finite"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {"type": "randn", "seed": 1,
                                                         "offset": "-4e38"}}]},
         ManifestError, "not finite"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {
                "type": "randn", "seed": 1,
                "set": [{"id": 1, "value": "1"}, {"id": 1, "value": "2"}]}}]},
         ManifestError, "set twice"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {
                "type": "ties", "groups": [{"count": 9, "logit": "1"}],
                "placement": "contiguous"}}]},
         ManifestError, "tie groups hold 9"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {
                "type": "ties", "groups": [{"count": 4, "logit": "1"}],
                "placement": "contiguous"}}]},
         ManifestError, "no 'rest'"),
        ({"id": "b", "kind": "boundary", "vocab": 8, "rows": [
            {"label": "x", "p": "0.5", "construction": {
                "type": "adjacent", "seed": 1, "position_seed": 1, "count": 9,
                "below": "5"}}]},
         ManifestError, "exceed vocab"),
        ({"id": "ordinary-s42-b4-v1024", "kind": "ordinary", "seed": 1, "batch": 1,
          "vocab": 8},
         ManifestError, "appears twice"),
    ],
    ids=["forced-inf", "forced-id", "p-one", "p-rounds-to-one", "set-inf", "ulps-inf",
         "offset-inf", "set-twice", "ties-over", "ties-rest", "adjacent-over", "dup-id"],
)
def test_semantic_refusals(case: dict, error: type[HarnessError], match: str) -> None:
    with pytest.raises(error, match=match):
        _parse(_smoke_with(case))


def test_permuted_ties_need_a_seed_and_contiguous_refuse_one() -> None:
    row = {"label": "x", "p": "0.5", "construction": {
        "type": "ties", "groups": [{"count": 8, "logit": "1"}], "placement": "permuted"}}
    with pytest.raises(ManifestError, match="schema"):
        _parse(_smoke_with({"id": "b", "kind": "boundary", "vocab": 8, "rows": [row]}))
    row["construction"].update(placement="contiguous", seed=3)
    with pytest.raises(ManifestError, match="schema"):
        _parse(_smoke_with({"id": "b", "kind": "boundary", "vocab": 8, "rows": [row]}))


# --- the predeclared H200 matrix is exactly issue 6's ----------------------------------------


def test_h200_matrix_is_the_predeclared_one() -> None:
    m = mf.parse_manifest(H200.read_bytes())
    assert m.backend == {"required": "cuda", "split_path_required": True,
                         "interpreter_sm_count": 132}
    assert m.limits == {"max_vocab": 262144, "max_batch": 64, "child_timeout_s": 600,
                        "run_timeout_s": 3600, "max_bundle_bytes": 64 * 1024 * 1024}
    forced = [c for c in m.cases if c["kind"] == "forced"]
    assert [c["vocab"] for c in forced] == [32000, 128256, 262144]
    for case in forced:
        v = case["vocab"]
        assert case["background_seed"] == 0
        assert case["grid"] == {
            "value": ["1e4", "1e10", "1e20", "1e30", "3.4028234663852886e38"],
            "p": ["0.5", "0.9", "0.999"],
            "forced_id": [0, v // 2 + 1, v - 1],
        }
        assert mf.case_batch(case) == 45
    shapes = [(1, 1024), (8, 1024), (64, 1024), (1, 32000), (8, 32000), (32, 32000),
              (1, 128256), (8, 128256), (4, 262144)]
    ordinary = [(c["seed"], c["batch"], c["vocab"]) for c in m.cases if c["kind"] == "ordinary"]
    assert ordinary == [(s, b, v) for s in (42, 1234) for b, v in shapes]
    boundary = {c["id"]: c for c in m.cases if c["kind"] == "boundary"}
    assert [c["kind"] for c in m.cases] == ["forced"] * 3 + ["ordinary"] * 18 + ["boundary"] * 5
    ties = boundary["boundary-ties-v128256"]
    assert ties["vocab"] == 128256
    assert [r["construction"]["placement"] for r in ties["rows"]] == ["contiguous", "permuted"]
    adjacent = boundary["boundary-adjacent-v32000"]
    assert [r["p"] for r in adjacent["rows"]] == ["0.1", "0.5", "0.9"]
    assert all(r["construction"]["seed"] == 7 and r["construction"]["count"] == 64
               for r in adjacent["rows"])
    huge = boundary["boundary-huge-v128256"]["rows"]
    assert [(r["construction"].get("offset"), r["p"]) for r in huge] == [
        ("1e4", "0.9"), ("1e6", "0.9"), ("-1e6", "0.9"), (None, "0.5"), (None, "0.75")]
    edge = [r["p"] for r in boundary["boundary-edge-p-v32000"]["rows"]]
    assert [to_float32(float(p)) for p in edge] == [
        to_float32(1e-7), 2.0**-149, 1.0 - 2.0**-24]


def test_smoke_is_small_and_interpreter() -> None:
    m = mf.parse_manifest(SMOKE.read_bytes())
    assert m.backend["required"] == "interpreter"
    layout = mf.expected_layout(m)
    assert max(c.vocab for c in layout) <= 32000
    assert {c.kind for c in layout} == {"forced", "ordinary", "boundary"}
    rows_at_32000 = sum(c.batch for c in layout if c.vocab == 32000)
    assert rows_at_32000 <= 2
    assert sum(c.batch for c in layout) <= 40


# --- layout ----------------------------------------------------------------------------------


def test_forced_layout_order_is_value_then_p_then_id() -> None:
    m = mf.parse_manifest(H200.read_bytes())
    case = mf.expected_layout(m)[1]
    assert case.id == "forced-v128256" and case.batch == 45 and case.vocab == 128256
    assert case.rows[0] == mf.RowLayout("forced", 0, "value=1e4 p=0.5 id=0")
    assert case.rows[1] == mf.RowLayout("forced", 64129, "value=1e4 p=0.5 id=64129")
    assert case.rows[3] == mf.RowLayout("forced", 0, "value=1e4 p=0.9 id=0")
    assert case.rows[9].label == "value=1e10 p=0.5 id=0"
    assert case.rows[-1] == mf.RowLayout("forced", 128255,
                                         "value=3.4028234663852886e38 p=0.999 id=128255")
    assert case.logits_path == "inputs/forced-v128256.logits.f32"
    assert case.logits_bytes == 45 * 128256 * 4 and case.p_bytes == 180


def test_layout_needs_no_torch_or_numpy() -> None:
    code = (
        "import sys, harness.core.manifest as m, harness.core.cases_index as ci\n"
        f"man = m.load_manifest({str(H200)!r}, require_frozen=False)\n"
        "layout = m.expected_layout(man)\n"
        "ci.check_against_manifest(ci.parse_cases_index(ci.render_cases_index(layout)), man)\n"
        "heavy = sorted(k for k in sys.modules if k.split('.')[0] in ('torch','numpy','triton'))\n"
        "assert not heavy, heavy\n"
        "print(len(layout), sum(c.batch for c in layout))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["26", "405"]


# --- exact float32 values ----------------------------------------------------------------------

finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(finite_f32)
def test_float32_step_is_nextafter(value: float) -> None:
    here = np.float32(value)
    up = np.nextafter(here, np.float32(np.inf), dtype=np.float32)
    down = np.nextafter(here, np.float32(-np.inf), dtype=np.float32)
    if np.isfinite(up):
        assert mf.float32_step(value, 1) == float(up) or (value == 0.0 and float(up) > 0)
    if np.isfinite(down):
        assert mf.float32_step(value, -1) == float(down) or (value == 0.0 and float(down) < 0)


@given(finite_f32, st.integers(-1000, 1000))
def test_float32_step_round_trips_and_orders(value: float, ulps: int) -> None:
    try:
        moved = mf.float32_step(value, ulps)
    except ManifestError:
        return
    assert to_float32(moved) == moved and math.isfinite(moved)
    assert mf.float32_step(moved, -ulps) == (0.0 if value == 0.0 else value)
    assert (moved > value) == (ulps > 0) or ulps == 0


@given(st.from_regex(r"[+-]?[0-9]{1,3}(\.[0-9]{0,8})?([eE][+-]?[0-9]{1,2})?", fullmatch=True))
def test_decimal_float32_follows_harness_rule(text: str) -> None:
    expected = to_float32(float(text))
    if math.isfinite(expected):
        assert mf.decimal_float32(text, what="x") == expected
    else:
        with pytest.raises(ManifestError):
            mf.decimal_float32(text, what="x")


def test_manifest_data_is_not_shared_between_parses() -> None:
    a = mf.parse_manifest(SMOKE.read_bytes())
    b = copy.deepcopy(a.data)
    assert a.data == b
